import { createHmac } from 'node:crypto';

/**
 * Hand-rolled JWS for tests: independent of Keygate's client and of jose, so
 * tests can build every malformed variant a hostile client could send.
 */
export function b64url(input: string | Buffer): string {
  return Buffer.from(input).toString('base64url');
}

export function sign(
  header: unknown,
  payload: unknown,
  secret: string | Buffer,
  alg: 'sha256' | 'sha384' | 'sha512' = 'sha256',
): string {
  const h = typeof header === 'string' ? header : b64url(JSON.stringify(header));
  const p = typeof payload === 'string' ? payload : b64url(JSON.stringify(payload));
  const s = createHmac(alg, secret).update(`${h}.${p}`).digest('base64url');
  return `${h}.${p}.${s}`;
}

export const HS256 = { alg: 'HS256', typ: 'JWT' };

export function nowNonce(offsetMs = 0): string {
  return (BigInt(Date.now() + offsetMs) * 1_000_000n + BigInt(Math.floor(Math.random() * 1e6))).toString();
}

export function claims(apiKey: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { type: 'OpenAPIV2', sub: apiKey, nonce: nowNonce(), ...extra };
}

export function token(apiKey: string, secret: string, extra: Record<string, unknown> = {}): string {
  return sign(HS256, claims(apiKey, extra), secret);
}
