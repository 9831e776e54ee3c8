// Tested in test/unit/management-tokens.test.ts, test/process/cli.test.ts.
import { generateManagementToken, sha256Hex } from '../../config/management-tokens.js';
import { UsageError } from '../cli-errors.js';
import { runCommand, str, type Command } from '../command-line.js';

export const managementTokenCommand: Command = {
  spec: {
    name: 'management-token',
    summary: 'print a new management API token and its line for the tokens file',
    options: [
      {
        name: 'name',
        type: 'string',
        value: 'name',
        help: 'who uses the token: the actor in the audit stream (1 to 64 of A-Z a-z 0-9 _ . @ -)',
      },
      { name: 'access', type: 'string', value: 'read|write', help: 'what the token may do' },
    ],
    details: `Prints the token (32 random bytes) once, and the line to add to
KEYGATE_MANAGEMENT_TOKENS_FILE, which holds only its SHA-256. Keygate reloads
the tokens file when it changes.`,
  },
  run(parsed, io) {
    const name = str(parsed, 'name');
    const access = str(parsed, 'access');
    const problems: string[] = [];
    if (!name || !/^[A-Za-z0-9_.@-]{1,64}$/.test(name)) problems.push('--name: 1 to 64 of A-Z a-z 0-9 _ . @ -');
    if (access !== 'read' && access !== 'write') problems.push('--access: read or write');
    if (problems.length > 0) throw new UsageError(problems.join('; '));
    const token = generateManagementToken();
    io.out.write(
      `token (shown only now; give it to ${name} and keep it secret):\n  ${token}\n\n` +
        `add to KEYGATE_MANAGEMENT_TOKENS_FILE under "tokens:":\n  - { name: ${name}, sha256: ${sha256Hex(token)}, access: ${access} }\n`,
    );
    return 0;
  },
};

/** The command on its own, synchronous (it never waits on anything). */
export function runManagementTokenCommand(
  argv: string[],
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): number {
  const io = {
    out,
    err,
    env: process.env,
    stdin: process.stdin,
    openKeyStore: () => Promise.reject(new Error('not used')),
  };
  return runCommand(managementTokenCommand, argv, io, 'keygate management-token') as number;
}
