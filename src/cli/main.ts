// Tested in test/unit/keys-actions.test.ts, test/unit/cli-reference.test.ts, test/process/cli.test.ts.
import type { CliIo } from './cli-io.js';
import { UsageError } from './cli-errors.js';
import { flag, runCommand, type Command, type LazyCommand } from './command-line.js';
import { packageVersion } from '../observe/package-version.js';

/**
 * `keygate <command>` imports that command's module and nothing else: a token is an HMAC over a few
 * bytes, and a script that mints one per request should not wait for the Redis client, the HTTP
 * client, metrics and the logger to load (test/process/light-commands.test.ts holds which packages
 * each light command loads). The summaries are here so that `keygate --help` loads no command.
 */
const lazy = (name: string, summary: string, load: () => Promise<Command>): LazyCommand => ({
  spec: { name, summary },
  load,
});

// The container tests and operators ask an image which build it holds.
const printVersion = (io: CliIo) => (io.out.write(`keygate ${packageVersion()}\n`), 0);

const versionCommand: Command = {
  spec: { name: 'version', summary: 'print the version (also: keygate --version)', options: [] },
  run: (_p, io) => printVersion(io),
};

const helpCommand: Command = {
  spec: {
    name: 'help',
    summary: 'print the help of a command: keygate help keys create',
    args: ['[command]', '[action]'],
    options: [],
  },
  // "keygate help X Y" is "keygate X Y --help".
  run: (parsed, io) => runCommand(program, [...parsed.args, '--help'], io, 'keygate'),
};

/** Every command, as `keygate --help` lists them; docs/reference/cli.md is generated from this table. */
export const program: Command = {
  spec: {
    name: 'keygate',
    summary: 'Keygate: an authentication sidecar for signed HS256 tokens.',
    options: [{ name: 'version', type: 'boolean', help: 'print the version' }],
    details:
      'Exit status: 0 success, 1 the command failed (invalid configuration, no such key), 2 usage error (on stderr).',
  },
  subcommands: [
    lazy('serve', 'run the proxy', async () => (await import('./serve/serve-command.js')).serveCommand),
    lazy(
      'demo',
      'run a demo upstream and Keygate in front of it with the demo key (the quickstart)',
      async () => (await import('./serve/demo-command.js')).demoCommand,
    ),
    lazy(
      'demo-upstream',
      'run only the demo upstream (for docker-compose and the Kubernetes example)',
      async () => (await import('./serve/demo-upstream.js')).demoUpstreamCommand,
    ),
    lazy('keys', 'manage API keys in Redis', async () => (await import('./keys/keys-command.js')).keysCommand),
    lazy(
      'owners',
      "manage owners' own rate limits in Redis",
      async () => (await import('./keys/owners-command.js')).ownersCommand,
    ),
    lazy(
      'audit',
      'print the audit log of key changes (oldest first; never a secret)',
      async () => (await import('./keys/audit-command.js')).auditCommand,
    ),
    lazy(
      'webhooks',
      'see and hurry webhook deliveries in Redis',
      async () => (await import('./keys/webhooks-command.js')).webhooksCommand,
    ),
    lazy(
      'token',
      'print a freshly signed token (use it as: Authorization: Bearer <token>)',
      async () => (await import('./credentials/token-command.js')).tokenCommand,
    ),
    lazy(
      'management-token',
      'print a new management API token and its line for the tokens file',
      async () => (await import('./credentials/management-token-command.js')).managementTokenCommand,
    ),
    lazy(
      'assertion',
      'the signed identity assertion (X-Keygate-Assertion): make keys, print the public set',
      async () => (await import('./credentials/assertion-command.js')).assertionCommand,
    ),
    lazy(
      'check-config',
      'validate the environment, the policy file and the keys file; start nothing',
      async () => (await import('./serve/check-config-command.js')).checkConfigCommand,
    ),
    versionCommand,
    helpCommand,
  ],
  run: (parsed, io) => {
    if (!flag(parsed, 'version')) throw new UsageError('give a command');
    return printVersion(io);
  },
};

const processIo = (): CliIo => ({
  out: process.stdout,
  err: process.stderr,
  env: process.env,
  stdin: process.stdin,
  // Imported when a key command opens the store: the Redis client loads only then.
  openKeyStore: async (env) => (await import('./keys/open-key-store.js')).openRedisKeyStore(env),
});

/** `keygate <argv>`: the exit status. Usage errors are written to stderr and are 2. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  return runCommand(program, argv, io, 'keygate');
}
