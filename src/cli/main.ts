import { assertionCommand } from './credentials/assertion-command.js';
import { checkConfigCommand } from './serve/check-config-command.js';
import type { CliIo } from './cli-io.js';
import { UsageError } from './cli-errors.js';
import { flag, runCommand, type Command } from './command-line.js';
import { demoCommand } from './serve/demo-command.js';
import { demoUpstreamCommand } from './serve/demo-upstream.js';
import { keysCommand, openRedisKeyStore } from './keys/keys-command.js';
import { managementTokenCommand } from './credentials/management-token-command.js';
import { ownersCommand } from './keys/owners-command.js';
import { packageVersion, serveCommand } from './serve/serve-command.js';
import { tokenCommand } from './credentials/token-command.js';

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
    serveCommand,
    demoCommand,
    demoUpstreamCommand,
    keysCommand,
    ownersCommand,
    tokenCommand,
    managementTokenCommand,
    assertionCommand,
    checkConfigCommand,
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
  openKeyStore: openRedisKeyStore,
});

/** `keygate <argv>`: the exit status. Usage errors are written to stderr and are 2. */
export async function main(argv: string[], io: CliIo = processIo()): Promise<number> {
  return runCommand(program, argv, io, 'keygate');
}
