import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { statSync } from 'node:fs';
import { readDataFile } from '../files/read-data-file.js';

/** The JWS algorithms an assertion key may have, by key type: Ed25519 signs EdDSA, P-256 signs ES256. */
export const ASSERTION_ALGS = ['EdDSA', 'ES256'] as const;
export type AssertionAlg = (typeof ASSERTION_ALGS)[number];

/** The public part of a key, as published at /.well-known/jwks.json: never `d`. */
export interface PublicJwk {
  readonly kty: 'OKP' | 'EC';
  readonly crv: 'Ed25519' | 'P-256';
  readonly x: string;
  readonly y?: string;
  readonly kid: string;
  readonly alg: AssertionAlg;
  readonly use: 'sig';
}

export interface AssertionKey {
  readonly kid: string;
  readonly alg: AssertionAlg;
  readonly publicJwk: PublicJwk;
  /** Present when the file holds the private part: only such a key can sign. */
  readonly privateKey: KeyObject | undefined;
}

/** A loaded keys file: every key (all published), and the one that signs. */
export interface AssertionKeySet {
  readonly keys: readonly AssertionKey[];
  readonly signing: AssertionKey;
  /** The public JWK Set, in file order. */
  readonly jwks: { readonly keys: readonly PublicJwk[] };
}

export class AssertionKeysError extends Error {
  override readonly name = 'AssertionKeysError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid assertion keys file:\n  - ${problems.join('\n  - ')}`);
  }
}

const KID = /^[A-Za-z0-9_.:-]{1,128}$/;
const B64URL = /^[A-Za-z0-9_-]+$/;
/** Key members a JWK may carry besides the key itself; anything else is refused, so a typo is not silently ignored. */
const KNOWN_MEMBERS = new Set(['kty', 'crv', 'x', 'y', 'd', 'kid', 'alg', 'use', 'key_ops']);

/**
 * The file holds private signing keys: like an SSH key, it must not be readable or writable by
 * "others". Group access is allowed, because a Kubernetes Secret volume with fsGroup is group-readable.
 */
export function assertionFileModeProblem(file: string): string | undefined {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    return `${file}: cannot read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`;
  }
  if ((mode & 0o007) === 0) return undefined;
  const octal = (mode & 0o777).toString(8).padStart(4, '0');
  return `${file}: holds private keys but is open to other users (mode ${octal}); chmod o-rwx it (0600 or 0640)`;
}

/**
 * Reads and checks a JWK Set of assertion keys (KEYGATE_ASSERTION_KEYS_FILE) and picks the signing
 * key: the one named by `signingKid`, or else the first key with a private part, in file order.
 * Every problem is listed at once; none quotes a key's value (only kids and member names).
 */
export function loadAssertionKeys(file: string, signingKid: string | undefined): AssertionKeySet {
  const modeProblem = assertionFileModeProblem(file);
  if (modeProblem !== undefined) throw new AssertionKeysError([modeProblem]);
  let data: unknown;
  try {
    data = readDataFile(file);
  } catch (err) {
    throw new AssertionKeysError([`${file}: ${(err as Error).message}`]);
  }
  const problems: string[] = [];
  const list = (data as { keys?: unknown } | null)?.keys;
  const keys: AssertionKey[] = [];
  if (!Array.isArray(list) || list.length === 0)
    problems.push(`${file}: keys: expected a JWK Set, {"keys": [ ... ]}, with at least one key`);
  else {
    const kids = new Set<string>();
    list.forEach((entry: unknown, i) => {
      const key = parseKey(entry, `${file}: keys[${i}]`, problems);
      if (key === undefined) return;
      if (kids.has(key.kid)) problems.push(`${file}: keys[${i}].kid: duplicate kid ${JSON.stringify(key.kid)}`);
      kids.add(key.kid);
      keys.push(key);
    });
  }
  let signing: AssertionKey | undefined;
  if (problems.length === 0) {
    if (signingKid !== undefined) {
      signing = keys.find((k) => k.kid === signingKid);
      if (signing === undefined)
        problems.push(`${file}: KEYGATE_ASSERTION_SIGNING_KID names ${JSON.stringify(signingKid)}, not in the file`);
      else if (signing.privateKey === undefined)
        problems.push(
          `${file}: KEYGATE_ASSERTION_SIGNING_KID names ${JSON.stringify(signingKid)}, which has no private part`,
        );
    } else {
      signing = keys.find((k) => k.privateKey !== undefined);
      if (signing === undefined)
        problems.push(
          `${file}: no key with a private part ("d"), so nothing can sign; keygate assertion keygen adds one`,
        );
    }
  }
  if (problems.length > 0 || signing === undefined) throw new AssertionKeysError(problems);
  return { keys, signing, jwks: { keys: keys.map((k) => k.publicJwk) } };
}

function parseKey(entry: unknown, at: string, problems: string[]): AssertionKey | undefined {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    problems.push(`${at}: expected a JWK object`);
    return undefined;
  }
  const jwk = entry as Record<string, unknown>;
  const before = problems.length;
  for (const name of Object.keys(jwk))
    if (!KNOWN_MEMBERS.has(name))
      problems.push(`${at}.${name}: not a member Keygate reads (kty crv x y d kid alg use)`);
  const { kid, kty, crv } = jwk;
  if (typeof kid !== 'string' || !KID.test(kid))
    problems.push(`${at}.kid: required; only A-Z a-z 0-9 _ . : - allowed, 1 to 128 chars`);
  let alg: AssertionAlg | undefined;
  if (kty === 'OKP' && crv === 'Ed25519') alg = 'EdDSA';
  else if (kty === 'EC' && crv === 'P-256') alg = 'ES256';
  else problems.push(`${at}: kty/crv must be OKP/Ed25519 (EdDSA) or EC/P-256 (ES256)`);
  if (jwk.alg !== undefined && alg !== undefined && jwk.alg !== alg)
    problems.push(`${at}.alg: a ${String(crv)} key signs ${alg}, not ${JSON.stringify(jwk.alg)}`);
  if (jwk.use !== undefined && jwk.use !== 'sig') problems.push(`${at}.use: "sig" (or absent)`);
  for (const member of alg === 'ES256' ? ['x', 'y'] : ['x'])
    if (typeof jwk[member] !== 'string' || !B64URL.test(jwk[member]))
      problems.push(`${at}.${member}: required, base64url`);
  if (jwk.d !== undefined && (typeof jwk.d !== 'string' || !B64URL.test(jwk.d)))
    problems.push(`${at}.d: base64url (the private part)`);
  if (problems.length > before || alg === undefined) return undefined;

  const publicJwk: PublicJwk = Object.freeze({
    kty: kty as PublicJwk['kty'],
    crv: crv as PublicJwk['crv'],
    x: jwk.x as string,
    ...(alg === 'ES256' && { y: jwk.y as string }),
    kid: kid as string,
    alg,
    use: 'sig',
  });
  try {
    // Checks the point is on the curve, for a published-only key too.
    createPublicKey({ key: { ...publicJwk }, format: 'jwk' });
    let privateKey: KeyObject | undefined;
    if (jwk.d !== undefined) {
      privateKey = createPrivateKey({ key: { ...publicJwk, d: jwk.d as string }, format: 'jwk' });
      // A private part that does not belong to x (and y) would sign assertions its published key never verifies.
      const derived = createPublicKey(privateKey).export({ format: 'jwk' });
      if (derived.x !== publicJwk.x || derived.y !== publicJwk.y) {
        problems.push(`${at}: the private part ("d") does not belong to the public part ("x"/"y")`);
        return undefined;
      }
    }
    return { kid: kid as string, alg, publicJwk, privateKey };
  } catch {
    // Node's message names no key bytes, but say it in our words: the public point is not on the curve, or d is out of range.
    problems.push(`${at}: not a valid ${String(crv)} key`);
    return undefined;
  }
}

/**
 * A new signing key as a private JWK (with `d`), for `keygate assertion keygen` and tests. The kid is
 * the alg, the date and random hex: unique without coordination, and sortable by age when read.
 */
export function newAssertionKey(alg: AssertionAlg, kid?: string): Record<string, string> {
  const pair =
    alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const jwk = pair.privateKey.export({ format: 'jwk' }) as Record<string, string>;
  const id = kid ?? `${alg.toLowerCase()}-${new Date().toISOString().slice(0, 10)}-${randomBytes(4).toString('hex')}`;
  return { kty: jwk.kty!, crv: jwk.crv!, x: jwk.x!, ...(jwk.y && { y: jwk.y }), d: jwk.d!, kid: id, alg, use: 'sig' };
}
