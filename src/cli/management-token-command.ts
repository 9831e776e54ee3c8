import { parseArgs } from 'node:util';
import { generateManagementToken, sha256Hex } from '../config/management-tokens.js';

const HELP = `Usage: keygate management-token --name NAME --access read|write

Prints a new management API token (32 random bytes) once, and the line to add
to KEYGATE_MANAGEMENT_TOKENS_FILE (which holds only its SHA-256). NAME is the
actor recorded in the audit stream for every change made with the token.
Keygate reloads the tokens file when it changes.
`;

export function managementTokenCommand(argv: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): number {
  let values: { name?: string; access?: string; help?: boolean };
  try {
    ({ values } = parseArgs({ args: argv, options: { name: { type: 'string' }, access: { type: 'string' }, help: { type: 'boolean', short: 'h' } } }));
  } catch (e) {
    err.write(`keygate management-token: ${(e as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    out.write(HELP);
    return 0;
  }
  const problems: string[] = [];
  if (!values.name || !/^[A-Za-z0-9_.@-]{1,64}$/.test(values.name)) problems.push('--name: 1 to 64 of A-Z a-z 0-9 _ . @ -');
  if (values.access !== 'read' && values.access !== 'write') problems.push('--access: read or write');
  if (problems.length > 0) {
    err.write(`keygate management-token: ${problems.join('; ')}\n\n${HELP}`);
    return 2;
  }
  const token = generateManagementToken();
  out.write(
    `token (shown only now; give it to ${values.name} and keep it secret):\n  ${token}\n\n` +
      `add to KEYGATE_MANAGEMENT_TOKENS_FILE under "tokens:":\n  - { name: ${values.name}, sha256: ${sha256Hex(token)}, access: ${values.access} }\n`,
  );
  return 0;
}
