import { parseArgs } from 'node:util';
import { createToken } from '../client/create-token.js';

const HELP = `Usage: keygate token --key <apiKey> [--secret-stdin | --secret <apiSecret>] [--recv-window <seconds>]

Prints a freshly signed token. Use it as: Authorization: Bearer <token>
Each token carries a new nonce and is accepted once.

The secret, in order of preference:
  KEYGATE_API_SECRET   environment variable (and KEYGATE_API_KEY for --key)
  --secret-stdin       read it from standard input (its first line), e.g.
                       keygate token --key K --secret-stdin < secret.txt
  --secret <S>         avoid: a command line is visible to every local user (ps, /proc)
`;

export async function tokenCommand(argv: string[], stdin: NodeJS.ReadableStream = process.stdin): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      key: { type: 'string' },
      secret: { type: 'string' },
      'secret-stdin': { type: 'boolean' },
      'recv-window': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (values['secret-stdin'] && values.secret !== undefined) {
    process.stderr.write('keygate token: use either --secret or --secret-stdin, not both\n');
    return 2;
  }
  const secret = values['secret-stdin'] ? await firstLine(stdin) : (values.secret ?? process.env.KEYGATE_API_SECRET);
  const key = values.key ?? process.env.KEYGATE_API_KEY;
  if (!key || !secret) {
    process.stderr.write(`keygate token: a key and a secret are required (--key or KEYGATE_API_KEY; KEYGATE_API_SECRET, --secret-stdin or --secret)\n\n${HELP}`);
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

/** The first line of a stream, without its line break: the secret is signed with as-is, so nothing else is trimmed. */
async function firstLine(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    text += String(chunk);
    if (text.includes('\n')) break;
  }
  return text.split(/\r?\n/)[0] ?? '';
}
