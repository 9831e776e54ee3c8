// Tested in test/e2e/auth.test.ts, test/repo/contract-doc.test.ts (the worked example), test/process/client-module.test.ts.
import { createHash, createHmac, createPrivateKey, sign, type KeyObject } from 'node:crypto';

/** An HS256 key: the API secret exactly as issued, used as a plain string (never Base64-decoded or encoded). */
export interface SecretCredentials {
  apiKey: string;
  apiSecret: string;
  privateKey?: undefined;
}

/**
 * An EdDSA or ES256 key: the client's private key (a PKCS#8 PEM, e.g. from
 * `keygate keys keygen`, or a KeyObject). The alg follows from its type:
 * Ed25519 → EdDSA, P-256 → ES256.
 */
export interface PrivateKeyCredentials {
  apiKey: string;
  privateKey: string | KeyObject;
  apiSecret?: undefined;
}

export type CreateTokenOptions = (SecretCredentials | PrivateKeyCredentials) & {
  /** Seconds; sent as a string claim when given. */
  recvWindow?: number;
  /** Nanoseconds since the epoch; defaults to now (unique per call within this process). */
  now?: bigint;
  /**
   * Binds the token to one request (docs/contract.md, "Binding a token to its request"):
   * `method` (sent upper case), `path` (the request target exactly as it will be sent: path and
   * query, percent-encoding as is), and `body` (its exact bytes; a string is its UTF-8 bytes) whose
   * SHA-256 becomes `body_sha256`. Without `body` the claim is left out (a request without a body).
   */
  bind?: TokenBinding;
};

export interface TokenBinding {
  method: string;
  path: string;
  body?: string | Uint8Array;
}

/** The binding claims for a request, as Keygate checks them. */
export function bindingClaims(bind: TokenBinding): Record<string, string> {
  const claims: Record<string, string> = { method: bind.method.toUpperCase(), path: bind.path };
  if (bind.body !== undefined) claims.body_sha256 = createHash('sha256').update(bind.body).digest('base64url');
  return claims;
}

let lastNonce = 0n;

/** Current time in nanoseconds, strictly increasing within this process so that no two tokens share a nonce. */
export function nonceNow(): bigint {
  let n = BigInt(Date.now()) * 1_000_000n + (process.hrtime.bigint() % 1_000_000n);
  if (n <= lastNonce) n = lastNonce + 1n;
  lastNonce = n;
  return n;
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

type Signer = { alg: 'HS256' | 'EdDSA' | 'ES256'; sign(input: Buffer): Buffer };

/**
 * How to sign for these credentials. node:crypto only, so the client module
 * loads nothing else: HMAC-SHA256 with the secret's UTF-8 bytes; Ed25519
 * (no digest); ECDSA P-256 over SHA-256 in the JWS r‖s form (64 bytes), not
 * OpenSSL's default DER, which Keygate refuses.
 */
function signerFor(options: SecretCredentials | PrivateKeyCredentials): Signer {
  if (options.privateKey === undefined) {
    const secret = Buffer.from(options.apiSecret, 'utf8');
    return { alg: 'HS256', sign: (input) => createHmac('sha256', secret).update(input).digest() };
  }
  const key = typeof options.privateKey === 'string' ? createPrivateKey(options.privateKey) : options.privateKey;
  if (key.type === 'private' && key.asymmetricKeyType === 'ed25519')
    return { alg: 'EdDSA', sign: (input) => sign(null, input, key) };
  if (key.type === 'private' && key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1')
    return { alg: 'ES256', sign: (input) => sign('sha256', input, { key, dsaEncoding: 'ieee-p1363' }) };
  throw new TypeError('privateKey must be an Ed25519 (EdDSA) or P-256 (ES256) private key');
}

/**
 * Mints a token exactly as the service's creation steps say: header
 * {alg, typ: JWT}; payload {type: "OpenAPIV2", sub, nonce, recv_window?}
 * with string values, and with `bind` the binding claims method, path, body_sha256?. HS256 with the plain secret is the contract's scheme;
 * a key created as EdDSA or ES256 signs the same claims with its private key.
 */

export async function createToken(options: CreateTokenOptions): Promise<string> {
  const signer = signerFor(options);
  const payload: Record<string, string> = {
    type: 'OpenAPIV2',
    sub: options.apiKey,
    nonce: (options.now ?? nonceNow()).toString(),
  };
  if (options.recvWindow !== undefined) payload.recv_window = String(options.recvWindow);
  if (options.bind !== undefined) Object.assign(payload, bindingClaims(options.bind));
  const input = `${b64url({ alg: signer.alg, typ: 'JWT' })}.${b64url(payload)}`;
  return `${input}.${signer.sign(Buffer.from(input)).toString('base64url')}`;
}

/** Returns `init` with `Authorization: Bearer <fresh token>` set, for fetch(). */
export async function withKeygateAuth(
  init: RequestInit,
  credentials: Omit<CreateTokenOptions, 'now'>,
): Promise<RequestInit> {
  const headers = new Headers(init.headers);
  headers.set('authorization', `Bearer ${await createToken(credentials as CreateTokenOptions)}`);
  return { ...init, headers };
}
