// @ts-check
// Hand-rolled HS256 tokens, shared by the tests and the benchmark/soak scripts. Independent of
// Keygate's client and of jose on purpose: tests build every malformed variant a hostile client
// could send, and the load generators mint millions of tokens before a run without loading Keygate.
import { createHmac, sign as cryptoSign } from 'node:crypto';

/** @param {string | Buffer} input */
export function b64url(input) {
  return Buffer.from(input).toString('base64url');
}

/**
 * A compact JWS: `header` and `payload` are JSON-encoded unless already a base64url string.
 * @param {unknown} header
 * @param {unknown} payload
 * @param {string | Buffer} secret
 * @param {'sha256' | 'sha384' | 'sha512'} [alg]
 */
export function sign(header, payload, secret, alg = 'sha256') {
  const h = typeof header === 'string' ? header : b64url(JSON.stringify(header));
  const p = typeof payload === 'string' ? payload : b64url(JSON.stringify(payload));
  const s = createHmac(alg, secret).update(`${h}.${p}`).digest('base64url');
  return `${h}.${p}.${s}`;
}

export const HS256 = { alg: 'HS256', typ: 'JWT' };

/**
 * A compact JWS signed with an Ed25519 or P-256 private key, whatever the header says (so tests can
 * lie about the alg). ES256 in the JWS r‖s form by default; `dsaEncoding: 'der'` gives OpenSSL's DER
 * form, which Keygate must refuse.
 * @param {unknown} header
 * @param {unknown} payload
 * @param {import('node:crypto').KeyObject} privateKey
 * @param {'ieee-p1363' | 'der'} [dsaEncoding]
 */
export function signWithKey(header, payload, privateKey, dsaEncoding = 'ieee-p1363') {
  const h = typeof header === 'string' ? header : b64url(JSON.stringify(header));
  const p = typeof payload === 'string' ? payload : b64url(JSON.stringify(payload));
  const input = Buffer.from(`${h}.${p}`);
  const s =
    privateKey.asymmetricKeyType === 'ed25519'
      ? cryptoSign(null, input, privateKey)
      : cryptoSign('sha256', input, { key: privateKey, dsaEncoding });
  return `${h}.${p}.${s.toString('base64url')}`;
}

/** The last nonce minted in this process, before its offset: the next one is later. */
let lastNs = 0n;

/**
 * A fresh nonce: nanoseconds since the epoch (`offsetMs` from now), random below the millisecond (two processes
 * minting in the same millisecond rarely meet) and strictly increasing within this process, as Keygate's own client
 * makes them: a random part alone repeats by chance (1,500 tokens minted in a few ms shared a nonce in about one
 * burst in fifteen, and the second was refused as a replay).
 * @param {number} [offsetMs]
 */
export function nowNonce(offsetMs = 0) {
  let ns = BigInt(Date.now()) * 1_000_000n + BigInt(Math.floor(Math.random() * 1e6));
  if (ns <= lastNs) ns = lastNs + 1n;
  lastNs = ns;
  return (ns + BigInt(offsetMs) * 1_000_000n).toString();
}

/**
 * The claims a client sends (type, sub, nonce: in that order), with `extra` on top; a `nonce` in
 * `extra` replaces the fresh one.
 * @param {string} apiKey
 * @param {Record<string, unknown>} [extra]
 * @returns {Record<string, unknown>}
 */
export function claims(apiKey, extra = {}) {
  return { type: 'OpenAPIV2', sub: apiKey, nonce: 'nonce' in extra ? undefined : nowNonce(), ...extra };
}

/**
 * A good HS256 token for `apiKey` signed with `secret` (`extra` as in claims()).
 * @param {string} apiKey
 * @param {string} secret
 * @param {Record<string, unknown>} [extra]
 */
export function token(apiKey, secret, extra = {}) {
  return sign(HS256, claims(apiKey, extra), secret);
}
