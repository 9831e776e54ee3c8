import { SignJWT } from 'jose';

export interface CreateTokenOptions {
  apiKey: string;
  /** The API secret exactly as issued: used as a plain string, never Base64-decoded or encoded. */
  apiSecret: string;
  /** Seconds; sent as a string claim when given. */
  recvWindow?: number;
  /** Nanoseconds since the epoch; defaults to now (unique per call within this process). */
  now?: bigint;
}

let lastNonce = 0n;

/** Current time in nanoseconds, strictly increasing within this process so that no two tokens share a nonce. */
export function nonceNow(): bigint {
  let n = BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
  if (n <= lastNonce) n = lastNonce + 1n;
  lastNonce = n;
  return n;
}

/**
 * Mints a token exactly as the service's creation steps say: header
 * {alg: HS256, typ: JWT}; payload {type: "OpenAPIV2", sub, nonce, recv_window?}
 * with string values; HS256 with the plain secret.
 */
export async function createToken(options: CreateTokenOptions): Promise<string> {
  const payload: Record<string, string> = {
    type: 'OpenAPIV2',
    sub: options.apiKey,
    nonce: (options.now ?? nonceNow()).toString(),
  };
  if (options.recvWindow !== undefined) payload.recv_window = String(options.recvWindow);
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .sign(new TextEncoder().encode(options.apiSecret));
}

/** Returns `init` with `Authorization: Bearer <fresh token>` set, for fetch(). */
export async function withKeygateAuth(
  init: RequestInit,
  credentials: Omit<CreateTokenOptions, 'now'>,
): Promise<RequestInit> {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${await createToken(credentials)}`);
  return { ...init, headers };
}
