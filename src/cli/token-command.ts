import { parseArgs } from 'node:util';
import { createToken } from '../client/create-token.js';

const HELP = `Usage: keygate token --key <apiKey> --secret <apiSecret> [--recv-window <seconds>]

Prints a freshly signed token. Use it as: Authorization: Bearer <token>
Each token carries a new nonce and is accepted once.
`;

export async function tokenCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      key: { type: 'string' },
      secret: { type: 'string' },
      'recv-window': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const secret = values.secret ?? process.env.KEYGATE_API_SECRET;
  const key = values.key ?? process.env.KEYGATE_API_KEY;
  if (!key || !secret) {
    process.stderr.write(`keygate token: --key and --secret are required (or KEYGATE_API_KEY / KEYGATE_API_SECRET)\n\n${HELP}`);
    return 2;
  }
  const rw = values['recv-window'];
  if (rw !== undefined && !/^[1-9]\d{0,5}$/.test(rw)) {
    process.stderr.write('keygate token: --recv-window must be a positive whole number of seconds\n');
    return 2;
  }
  const token = await createToken({ apiKey: key, apiSecret: secret, ...(rw !== undefined && { recvWindow: Number(rw) }) });
  process.stdout.write(`${token}\n`);
  return 0;
}
