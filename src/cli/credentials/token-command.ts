// Tested in test/process/cli.test.ts, test/process/quickstart.test.ts, test/process/asymmetric-keys-cli.test.ts.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createToken, type TokenBinding } from '../../client/create-token.js';
import { algOfPrivateKey } from '../../keys/public-key.js';
import { DEFAULT_ROUTES_FILE } from '../../policy/policy.js';
import { UsageError } from '../cli-errors.js';
import { flag, str, type Command } from '../command-line.js';

export const tokenCommand: Command = {
  spec: {
    name: 'token',
    summary: 'print a freshly signed token (use it as: Authorization: Bearer <token>)',
    args: ['[path]'],
    options: [
      { name: 'key', type: 'string', value: 'apiKey', help: 'the API key (default: KEYGATE_API_KEY)' },
      {
        name: 'private-key',
        type: 'string',
        value: 'file',
        help: 'sign EdDSA or ES256 with this PKCS#8 PEM private key (the alg follows from the key)',
      },
      { name: 'secret-stdin', type: 'boolean', help: 'read the secret from the first line of standard input' },
      {
        name: 'secret',
        type: 'string',
        value: 'apiSecret',
        help: 'avoid: a command line is visible to every local user (ps, /proc)',
      },
      {
        name: 'recv-window',
        type: 'string',
        value: 'seconds',
        help: "how long the token is valid after its nonce time (at most the policy's maxRecvWindowSeconds)",
      },
      {
        name: 'bind',
        type: 'string',
        value: 'METHOD',
        help: 'bind the token to one request: --bind METHOD PATH (the target exactly as sent, with its query)',
      },
      {
        name: 'body',
        type: 'string',
        value: 'file',
        help: "with --bind: the request body's exact bytes, hashed into body_sha256",
      },
    ],
    details: `Each token carries a new nonce and is accepted once.
An EdDSA or ES256 key signs with its private key: --private-key FILE (e.g. the
file \`keygate keys keygen\` wrote). An HS256 key signs with its secret,
in order of preference:
  KEYGATE_API_SECRET   environment variable (and KEYGATE_API_KEY for --key)
  --secret-stdin       e.g. keygate token --key K --secret-stdin < secret.txt
  --secret <S>         visible to every local user
--recv-window above maxRecvWindowSeconds of the policy file (KEYGATE_CONFIG, or the
shipped config/routes.yaml: 60) is refused: the server would answer 40106.
--bind GET '/api/v3/orders?symbol=BTC' [--body FILE] binds the token to that
request (method, target as sent, body bytes): Keygate refuses it for any other.`,
  },
  async run(parsed, io) {
    const key = str(parsed, 'key') ?? io.env.KEYGATE_API_KEY;
    const rw = str(parsed, 'recv-window');
    if (rw !== undefined && !/^[1-9]\d{0,5}$/.test(rw))
      throw new UsageError('--recv-window must be a positive whole number of seconds');
    if (rw !== undefined) await checkRecvWindow(Number(rw), io.env.KEYGATE_CONFIG || DEFAULT_ROUTES_FILE);
    const recvWindow = {
      ...(rw !== undefined && { recvWindow: Number(rw) }),
      ...bindingOf(parsed.args, str(parsed, 'bind'), str(parsed, 'body')),
    };
    const privateKeyFile = str(parsed, 'private-key');
    if (privateKeyFile !== undefined) {
      if (str(parsed, 'secret') !== undefined || flag(parsed, 'secret-stdin'))
        throw new UsageError('use either --private-key or a secret, not both');
      if (!key) throw new UsageError('a key is required (--key or KEYGATE_API_KEY)');
      io.out.write(
        `${await createToken({ apiKey: key, privateKey: readPrivateKey(privateKeyFile), ...recvWindow })}\n`,
      );
      return 0;
    }
    const given = str(parsed, 'secret');
    if (flag(parsed, 'secret-stdin') && given !== undefined)
      throw new UsageError('use either --secret or --secret-stdin, not both');
    const secret = flag(parsed, 'secret-stdin') ? await firstLine(io.stdin) : (given ?? io.env.KEYGATE_API_SECRET);
    if (!key || !secret)
      throw new UsageError(
        'a key and a secret are required (--key or KEYGATE_API_KEY; KEYGATE_API_SECRET, --secret-stdin or --secret)',
      );
    io.out.write(`${await createToken({ apiKey: key, apiSecret: secret, ...recvWindow })}\n`);
    return 0;
  },
};

/** `--bind METHOD PATH [--body FILE]` as createToken's `bind`; a half-given binding is a usage error. */
function bindingOf(
  args: readonly string[],
  method: string | undefined,
  bodyFile: string | undefined,
): { bind?: TokenBinding } {
  const path = args[0];
  if (method === undefined) {
    if (path !== undefined || bodyFile !== undefined)
      throw new UsageError('a path or --body goes with --bind METHOD PATH');
    return {};
  }
  if (!/^[A-Za-z]{1,16}$/.test(method)) throw new UsageError(`--bind: expected a method such as GET, got ${method}`);
  if (path === undefined || !path.startsWith('/'))
    throw new UsageError(
      '--bind METHOD PATH: the path (and query) exactly as the request will send it, starting with /',
    );
  if (bodyFile === undefined) return { bind: { method, path } };
  let body: Buffer;
  try {
    body = readFileSync(bodyFile);
  } catch (err) {
    throw new UsageError(`--body ${bodyFile}: ${(err as Error).message}`);
  }
  return { bind: { method, path, body } };
}

/** The PEM text; a file that cannot be read or is not a usable key is a usage error naming the file, never a stack. */
function readPrivateKey(file: string): KeyObject {
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--private-key ${file}: ${(err as Error).message}`);
  }
  try {
    const key = createPrivateKey(pem);
    if (algOfPrivateKey(key) === undefined) throw new Error(`a ${key.asymmetricKeyType ?? 'different'} key`);
    return key;
  } catch (err) {
    throw new UsageError(
      `--private-key ${file}: not an Ed25519 or P-256 private key in PEM form (${(err as Error).message})`,
    );
  }
}

/**
 * A server refuses a token whose recv_window is over its policy's cap (40106), so minting one only
 * moves the failure to the first request. The policy is the one a server started with this
 * environment would load; point KEYGATE_CONFIG at the server's file to check against its cap.
 */
async function checkRecvWindow(seconds: number, policyFile: string): Promise<void> {
  // Only --recv-window reads the policy: a plain `keygate token` loads neither it nor its schema validator.
  const { loadPolicy } = await import('../../policy/load-policy.js');
  const problems: string[] = [];
  const { maxRecvWindowSeconds } = loadPolicy(policyFile, problems);
  if (problems.length > 0) return; // the policy is not readable here: the server is the judge
  if (seconds > maxRecvWindowSeconds)
    throw new UsageError(
      `--recv-window ${seconds} is over maxRecvWindowSeconds ${maxRecvWindowSeconds} in ${policyFile}: ` +
        'a server with that policy refuses the token (40106); give at most that, or set KEYGATE_CONFIG to the policy file of the server you call',
    );
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
