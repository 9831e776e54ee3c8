import { generateSecret } from './secret-format.js';
import { createPublicKey, randomBytes } from 'node:crypto';
import { parseCidrList } from '../net/cidr.js';
import { parseRateLimitSpec, type RateLimitSpec } from '../policy/rate-limit-spec.js';
import { REGION_NAME, REGION_NAME_RULE } from '../policy/regions.js';
import {
  canonicalPem,
  importPublicKey,
  isKeyAlg,
  publicKeyFingerprint,
  type KeyAlg,
  type PublicKeyAlg,
} from './public-key.js';
import { hasUnprintable, PRINTABLE_RULE } from './printable-text.js';
import { publicKeyProblem } from './weak-public-key.js';

/** One API key as stored. `apiKey` is the JWT `sub`; `id` is what the upstream sees. */
export interface KeyRecord {
  readonly id: string;
  readonly apiKey: string;
  /** The service's own account id the key belongs to (sent upstream as X-Api-Key-Owner); set at creation, never changed. */
  readonly owner?: string;
  /** How the key's tokens are signed; absent means HS256 (the contract's scheme, and every key made before algs existed). */
  readonly alg?: PublicKeyAlg;
  /** An HS256 key's shared secret; an EdDSA/ES256 key has none. */
  readonly secret?: string;
  /** An EdDSA/ES256 key's SPKI PEM (canonical form): all Keygate holds of the client's credential. */
  readonly publicKey?: string;
  readonly scopes: readonly string[];
  readonly allowIps: readonly string[];
  readonly label?: string;
  readonly state: 'active' | 'revoked';
  readonly createdAt: string;
  readonly revokedAt?: string;
  readonly revokeReason?: string;
  readonly expiresAt?: string;
  readonly updatedAt?: string;
  /** This key's own rate limit; without one the policy's defaultRateLimit applies (if any). */
  readonly rateLimit?: RateLimitSpec;
  /**
   * `required`: every token must name its request (method, path, and body_sha256 when there is a body);
   * absent means `off` (claims that are present are still checked), so older records read the same.
   */
  readonly binding?: 'required';
  /** Credentials replaced by `keys rotate` (secrets or public keys), still accepted until `validUntil`. */
  readonly previousSecrets?: readonly PreviousSecret[];
  /** Regions: the region whose request-state Redis admits this key's tokens (its owner's home wins; docs/regions.md). */
  readonly home?: string;
  /** Regions: when `home` last changed (keystore TIME, ms): the new home refuses older nonces (home_moved). */
  readonly homeMovedAtMs?: number;
}

/**
 * At most this many previous secrets are kept (rotate drops the oldest) and checked (a record
 * from a file or an older version with more is cut to its newest): a forged token for a key costs
 * at most 1 + this many HMACs, however often the key was rotated.
 */
export const MAX_PREVIOUS_SECRETS = 3;

/** A replaced credential: an HS256 secret, or (with `alg`) an EdDSA/ES256 public key. */
export interface PreviousSecret {
  readonly secret?: string;
  readonly alg?: PublicKeyAlg;
  readonly publicKey?: string;
  readonly validUntil: string;
}

/** A record without createdAt was created at the epoch: one string shared by all such records. */
const EPOCH = new Date(0).toISOString();

/** Lists (scopes, allowIps) as a record holds them: `createListSharing` may hand one copy to many records. */
export type ListInterner = (list: readonly string[]) => readonly string[];

const unshared: ListInterner = (list) => list;

/**
 * For loading many records at once (a keys file): records with the same scopes (or allowIps) get
 * one frozen list between them, and every empty list is one frozen list, instead of an array per
 * record (a million keys with the same scopes held a million copies). Frozen, as it is shared:
 * records are never edited in place (edits build a new record).
 */
export function createListSharing(): ListInterner {
  const none: readonly string[] = Object.freeze([]);
  // Lists are shared before they are checked, so a name must tell any two lists apart, valid or not.
  const singles = new Map<string, readonly string[]>();
  const longer = new Map<string, readonly string[]>();
  return (list) => {
    if (list.length === 0) return none;
    const [seen, name] = list.length === 1 ? [singles, list[0]!] : [longer, JSON.stringify(list)];
    let shared = seen.get(name);
    if (shared === undefined) seen.set(name, (shared = Object.freeze([...list])));
    return shared;
  };
}

const SCOPE = /^[A-Za-z0-9_.:*-]{1,128}$/;
const TOKEN_ID = /^[A-Za-z0-9_.-]{1,128}$/;
/** An account id as the service spells it; the same alphabet as ids, so it is safe in a header and a log. */
export const OWNER = /^[A-Za-z0-9_.-]{1,255}$/;
export const OWNER_RULE = 'only A-Z a-z 0-9 _ . - allowed, 1 to 255 chars';

/**
 * Validates an untrusted object (file, Redis, CLI) into a KeyRecord, or lists every problem.
 * `stored`: a record Keygate itself wrote (Redis). The text rule (printable-text.ts) applies to
 * what comes in, not to what is stored: a key stored before the rule keeps working, and is
 * escaped wherever it is printed.
 */
export function parseKeyRecord(
  input: unknown,
  where: string,
  stored = false,
  share: ListInterner = unshared,
): { record?: KeyRecord; errors: string[] } {
  const errors: string[] = [];
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { errors: [`${where}: must be an object`] };
  }
  const o = input as Record<string, unknown>;
  const str = (name: string, required: boolean): string | undefined => {
    const v = o[name];
    if (v === undefined || v === null) {
      if (required) errors.push(`${where}.${name}: required`);
      return undefined;
    }
    if (typeof v !== 'string' || v.length === 0) {
      errors.push(`${where}.${name}: must be a non-empty string`);
      return undefined;
    }
    return v;
  };
  const apiKey = str('apiKey', true);
  if (apiKey !== undefined && !TOKEN_ID.test(apiKey))
    errors.push(`${where}.apiKey: only A-Z a-z 0-9 _ . - allowed, at most 128 chars`);
  const credential = parseCredential(o, where, errors, stored);
  const id = str('id', false) ?? apiKey;
  if (id !== undefined && !TOKEN_ID.test(id))
    errors.push(`${where}.id: only A-Z a-z 0-9 _ . - allowed, at most 128 chars`);
  const owner = str('owner', false);
  if (owner !== undefined && !OWNER.test(owner)) errors.push(`${where}.owner: ${OWNER_RULE}`);
  const scopes = share(stringList(o.scopes, `${where}.scopes`, errors));
  for (const s of scopes) if (!SCOPE.test(s)) errors.push(`${where}.scopes: invalid scope ${JSON.stringify(s)}`);
  const allowIps = share(stringList(o.allowIps, `${where}.allowIps`, errors));
  if (allowIps.length > 0) errors.push(...parseCidrList(allowIps, `${where}.allowIps`).errors);
  const state = o.state ?? 'active';
  if (state !== 'active' && state !== 'revoked') errors.push(`${where}.state: must be "active" or "revoked"`);
  const label = str('label', false);
  const revokeReason = str('revokeReason', false);
  if (!stored)
    for (const [name, text] of [
      ['label', label],
      ['revokeReason', revokeReason],
    ] as const)
      if (text !== undefined && hasUnprintable(text)) errors.push(`${where}.${name}: ${PRINTABLE_RULE}`);
  const createdAt = str('createdAt', false) ?? EPOCH;
  const revokedAt = str('revokedAt', false);
  const expiresAt = str('expiresAt', false);
  if (expiresAt !== undefined && Number.isNaN(Date.parse(expiresAt))) errors.push(`${where}.expiresAt: not a date`);
  const updatedAt = str('updatedAt', false);
  const previousSecrets = previousSecretList(o.previousSecrets, `${where}.previousSecrets`, errors, stored);
  const rateLimit = parseRateLimitSpec(o.rateLimit, `${where}.rateLimit`, errors);
  const binding = o.binding ?? 'off';
  if (binding !== 'off' && binding !== 'required') errors.push(`${where}.binding: must be "off" or "required"`);
  const home = str('home', false);
  if (home !== undefined && !REGION_NAME.test(home)) errors.push(`${where}.home: ${REGION_NAME_RULE}`);
  const homeMovedAtMs = o.homeMovedAtMs;
  if (homeMovedAtMs !== undefined && (typeof homeMovedAtMs !== 'number' || !Number.isSafeInteger(homeMovedAtMs)))
    errors.push(`${where}.homeMovedAtMs: must be an integer (ms since the epoch)`);
  if (errors.length > 0 || apiKey === undefined || credential === undefined || id === undefined) return { errors };
  const record: KeyRecord = {
    id,
    apiKey,
    ...(owner !== undefined && { owner }),
    ...credential,
    scopes,
    allowIps,
    state: state as KeyRecord['state'],
    createdAt,
    ...(label !== undefined && { label }),
    ...(revokedAt !== undefined && { revokedAt }),
    ...(revokeReason !== undefined && { revokeReason }),
    ...(expiresAt !== undefined && { expiresAt }),
    ...(updatedAt !== undefined && { updatedAt }),
    ...(rateLimit !== undefined && { rateLimit }),
    ...(binding === 'required' && { binding }),
    ...(previousSecrets.length > 0 && { previousSecrets }),
    ...(home !== undefined && { home }),
    ...(typeof homeMovedAtMs === 'number' && { homeMovedAtMs }),
  };
  return { record, errors };
}

type Credential = { secret: string } | { alg: PublicKeyAlg; publicKey: string };

/**
 * A key's credential, by its alg: HS256 (the default) needs a secret of at
 * least 16 bytes and no public key; EdDSA/ES256 need an SPKI PEM of that key
 * type and no secret, so a public key can never be mistaken for an HMAC secret.
 */
function parseCredential(
  o: Record<string, unknown>,
  where: string,
  errors: string[],
  stored: boolean,
): Credential | undefined {
  const alg = o.alg ?? 'HS256';
  if (!isKeyAlg(alg)) {
    errors.push(`${where}.alg: must be "HS256", "EdDSA" or "ES256"`);
    return undefined;
  }
  const secret = o.apiSecret ?? o.secret;
  if (alg === 'HS256') {
    if (o.publicKey !== undefined) errors.push(`${where}.publicKey: only an EdDSA or ES256 key has one`);
    if (secret === undefined || secret === null) errors.push(`${where}.apiSecret: required`);
    else if (typeof secret !== 'string' || secret.length === 0)
      errors.push(`${where}.apiSecret: must be a non-empty string`);
    else if (Buffer.byteLength(secret) < 16) errors.push(`${where}.apiSecret: must be at least 16 bytes`);
    else if (o.publicKey === undefined) return { secret };
    return undefined;
  }
  if (secret !== undefined) errors.push(`${where}.apiSecret: an ${alg} key has no secret (only its publicKey)`);
  const publicKey = parsePublicKey(o.publicKey, alg, `${where}.publicKey`, errors, stored);
  return publicKey === undefined || secret !== undefined ? undefined : { alg, publicKey };
}

/**
 * A public key that comes in (keys file, CLI, API, import, and every change re-validated) is also
 * checked for what node:crypto lets through (weak-public-key.ts): a small-order or non-canonical
 * Ed25519 point, a compressed P-256 point. A stored one is not, so a weak key already in Redis still
 * loads, lists, revokes and deletes; prepareKey refuses to verify with it.
 */
function parsePublicKey(
  v: unknown,
  alg: PublicKeyAlg,
  where: string,
  errors: string[],
  stored: boolean,
): string | undefined {
  if (typeof v !== 'string' || v.length === 0) {
    errors.push(`${where}: required for an ${alg} key (an SPKI PEM)`);
    return undefined;
  }
  const imported = importPublicKey(v, alg);
  if ('error' in imported) {
    errors.push(`${where}: ${imported.error}`);
    return undefined;
  }
  const weak = stored ? undefined : publicKeyProblem(imported.key);
  if (weak !== undefined) {
    errors.push(`${where}: ${weak}`);
    return undefined;
  }
  return canonicalPem(imported.key);
}

function previousSecretList(v: unknown, where: string, errors: string[], stored: boolean): PreviousSecret[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    errors.push(`${where}: must be a list`);
    return [];
  }
  const out: PreviousSecret[] = [];
  v.forEach((entry: unknown, i) => {
    const e = entry as {
      apiSecret?: unknown;
      secret?: unknown;
      alg?: unknown;
      publicKey?: unknown;
      validUntil?: unknown;
    } | null;
    if (typeof e?.validUntil !== 'string' || Number.isNaN(Date.parse(e.validUntil))) {
      errors.push(`${where}[${i}]: needs apiSecret (or alg and publicKey) and a validUntil date`);
      return;
    }
    if (e.alg !== undefined && e.alg !== 'HS256') {
      if (e.alg !== 'EdDSA' && e.alg !== 'ES256') {
        errors.push(`${where}[${i}].alg: must be "HS256", "EdDSA" or "ES256"`);
        return;
      }
      const publicKey = parsePublicKey(e.publicKey, e.alg, `${where}[${i}].publicKey`, errors, stored);
      if (publicKey !== undefined) out.push({ alg: e.alg, publicKey, validUntil: e.validUntil });
      return;
    }
    const secret = e.apiSecret ?? e.secret;
    if (typeof secret !== 'string' || secret.length === 0) {
      errors.push(`${where}[${i}]: needs apiSecret (or alg and publicKey) and a validUntil date`);
      return;
    }
    out.push({ secret, validUntil: e.validUntil });
  });
  return out;
}

function stringList(v: unknown, where: string, errors: string[]): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    errors.push(`${where}: must be a list of strings`);
    return [];
  }
  return v.length < 2 ? [...(v as string[])] : [...new Set(v as string[])];
}

/**
 * The external form (Redis, keys files, exports): `apiSecret` is the field
 * name used everywhere outside the process. `sealSecret` may replace each
 * secret with a sealed (encrypted) string stored under `encSecret`.
 */
export function toExternal(r: KeyRecord, sealSecret?: (secret: string) => string): Record<string, unknown> {
  const { secret, previousSecrets, ...rest } = r;
  // A public key is not a secret: it is stored as is, never sealed.
  const put = (s: string | undefined) =>
    s === undefined ? {} : sealSecret ? { encSecret: sealSecret(s) } : { apiSecret: s };
  return {
    ...rest,
    ...put(secret),
    ...(previousSecrets && {
      previousSecrets: previousSecrets.map(({ secret: s, ...p }) => ({ ...put(s), ...p })),
    }),
  };
}

export type PublicKeyView = Omit<KeyRecord, 'secret' | 'previousSecrets' | 'alg' | 'publicKey'> & {
  status: KeyStatus;
  alg: KeyAlg;
  /** An EdDSA/ES256 key's public key fingerprint (publicKeyFingerprint in public-key.ts). */
  publicKeyFingerprint?: string;
  previousSecrets?: Array<{ validUntil: string; alg: KeyAlg; publicKeyFingerprint?: string }>;
};

export type KeyStatus = 'active' | 'revoked' | 'expired';

/** active, revoked, or expired (an active key past its expiresAt, treated like revoked). */
export function keyStatus(r: KeyRecord, nowMs: number): KeyStatus {
  if (r.state === 'revoked') return 'revoked';
  if (r.expiresAt !== undefined && Date.parse(r.expiresAt) <= nowMs) return 'expired';
  return 'active';
}

/** A view of a record that is safe to print or log: never a secret. */
export function publicView(r: KeyRecord, nowMs = Date.now()): PublicKeyView {
  const { secret: _secret, previousSecrets, alg, publicKey, ...rest } = r;
  return {
    ...rest,
    status: keyStatus(r, nowMs),
    alg: alg ?? 'HS256',
    ...(publicKey !== undefined && { publicKeyFingerprint: fingerprintOf(publicKey) }),
    ...(previousSecrets && {
      previousSecrets: previousSecrets.map((p) => ({
        validUntil: p.validUntil,
        alg: p.alg ?? 'HS256',
        ...(p.publicKey !== undefined && { publicKeyFingerprint: fingerprintOf(p.publicKey) }),
      })),
    }),
  };
}

function fingerprintOf(pem: string): string {
  return publicKeyFingerprint(createPublicKey(pem));
}

/** 32 random bytes for secrets (base64url, used by clients as a plain string); 16 for key names. */
export function generateKeyMaterial(secretPrefix?: string): { apiKey: string; secret: string; id: string } {
  return {
    apiKey: `kg_${randomBytes(16).toString('hex')}`,
    secret: generateSecret(secretPrefix),
    id: `key_${randomBytes(8).toString('hex')}`,
  };
}
