import { generateSecret } from './secret-format.js';
import {
  generateKeyMaterial,
  MAX_PREVIOUS_SECRETS,
  parseKeyRecord,
  toExternal,
  type KeyRecord,
  type PreviousSecret,
} from './key-record.js';
import type { KeyAlg } from './public-key.js';
import type { RateLimitSpec } from '../policy/rate-limit-spec.js';

/**
 * Every change an operator can make to a key, as pure functions of
 * (record, input, now): the key model's side of a change. The key operations
 * (src/operations/key-operations.ts) load, check state, write and audit around
 * them for both `keygate keys` and the management API; tests drive them with a
 * clock. Each result is re-validated with parseKeyRecord.
 */
export interface KeyChanges {
  scopes?: string[];
  allowIps?: string[];
  label?: string;
  /** ISO date, or null to remove the expiry. */
  expiresAt?: string | null;
  /** The key's own limit, or null to remove it (the policy's defaultRateLimit then applies). */
  rateLimit?: RateLimitSpec | null;
  /** A new burst for the key's current rate (update only; needs a limit). */
  burst?: number;
  /** Whether every token must be bound to its request. */
  binding?: 'off' | 'required';
  /** Regions: the key's home region (the key operations check it against the regions and the owner's home). */
  home?: string;
}

export type KeyChangeResult = { record: KeyRecord; errors: [] } | { record?: undefined; errors: string[] };

function revalidate(o: Record<string, unknown>): KeyChangeResult {
  const { record, errors } = parseKeyRecord(o, 'key');
  return record ? { record, errors: [] } : { errors };
}

/**
 * A key's credential as an operator gives it: HS256 (the default) gets a new
 * random secret; EdDSA/ES256 take the client's public key (SPKI PEM), and
 * Keygate makes no secret at all.
 */
export interface CredentialInput {
  alg?: KeyAlg;
  publicKey?: string;
}

/** What only a new key has: its owner, set at creation and never changed; and its credential. */
export interface NewKeyInput extends KeyChanges, CredentialInput {
  owner?: string;
}

/** The external fields of a new credential (parseKeyRecord checks them: the PEM's type against the alg). */
function credentialFields(input: CredentialInput, secret: string): Record<string, unknown> {
  const alg = input.alg ?? 'HS256';
  if (alg === 'HS256')
    return input.publicKey === undefined ? { apiSecret: secret } : { apiSecret: secret, publicKey: input.publicKey };
  return { alg, publicKey: input.publicKey };
}

/** `secretPrefix`: the issued secret's prefix (KEYGATE_SECRET_PREFIX; default `kgs_`, keys/secret-format.ts). */
export function newKey(changes: NewKeyInput, nowMs: number, secretPrefix?: string): KeyChangeResult {
  const m = generateKeyMaterial(secretPrefix);
  return revalidate({
    apiKey: m.apiKey,
    ...credentialFields(changes, m.secret),
    id: m.id,
    ...(changes.owner !== undefined && { owner: changes.owner }),
    scopes: changes.scopes ?? [],
    allowIps: changes.allowIps ?? [],
    label: changes.label,
    createdAt: new Date(nowMs).toISOString(),
    ...(changes.expiresAt && { expiresAt: changes.expiresAt }),
    ...(changes.rateLimit && { rateLimit: changes.rateLimit }),
    ...(changes.binding !== undefined && { binding: changes.binding }),
    ...(changes.home !== undefined && { home: changes.home }),
  });
}

export function updateKey(record: KeyRecord, changes: KeyChanges, nowMs: number): KeyChangeResult {
  const o = { ...toExternal(record), updatedAt: new Date(nowMs).toISOString() } as Record<string, unknown>;
  if (changes.scopes !== undefined) o.scopes = changes.scopes;
  if (changes.allowIps !== undefined) o.allowIps = changes.allowIps;
  if (changes.label !== undefined) o.label = changes.label;
  if (changes.expiresAt === null) delete o.expiresAt;
  else if (changes.expiresAt !== undefined) o.expiresAt = changes.expiresAt;
  if (changes.rateLimit === null) delete o.rateLimit;
  else if (changes.rateLimit !== undefined) o.rateLimit = changes.rateLimit;
  if (changes.binding === 'off') delete o.binding;
  else if (changes.binding !== undefined) o.binding = changes.binding;
  // A move is stamped with its time: the new home refuses the nonces the old one may have admitted (home_moved).
  if (changes.home !== undefined && changes.home !== record.home) {
    o.home = changes.home;
    o.homeMovedAtMs = nowMs;
  }
  if (changes.burst !== undefined) {
    const current = o.rateLimit as RateLimitSpec | undefined;
    if (!current) return { errors: ['key.rateLimit: --burst needs a rate (give --rate-limit, or set one first)'] };
    o.rateLimit = { rate: current.rate, burst: changes.burst };
  }
  return revalidate(o);
}

export function revokeKey(record: KeyRecord, reason: string | undefined, nowMs: number): KeyRecord {
  const at = new Date(nowMs).toISOString();
  const { revokeReason: _old, ...rest } = record;
  return { ...rest, state: 'revoked', revokedAt: at, updatedAt: at, ...(reason && { revokeReason: reason }) };
}

/**
 * Issues a new credential: by default a new secret of the key's alg (an
 * EdDSA/ES256 key must be given its new public key); with `to`, the key moves
 * to that alg (HS256 → EdDSA, or back). The old credential, whatever its alg,
 * stays valid for `graceMs` (0 = stops at once); earlier ones still inside
 * their own grace are kept, expired ones dropped, at most MAX_PREVIOUS_SECRETS in all (the
 * oldest go first). `secret` is returned only
 * when a new one was made.
 */
export function rotateKey(
  record: KeyRecord,
  graceMs: number,
  nowMs: number,
  to: CredentialInput = {},
  secretPrefix?: string,
): { record: KeyRecord; secret?: string; errors: string[] } {
  const alg = to.alg ?? record.alg ?? 'HS256';
  if (alg !== 'HS256' && to.publicKey === undefined)
    return { record, errors: [`key.publicKey: rotating to an ${alg} credential needs its new public key`] };
  const kept = (record.previousSecrets ?? []).filter((p) => Date.parse(p.validUntil) > nowMs);
  const validUntil = new Date(nowMs + graceMs).toISOString();
  // The old credential as it was: an HS256 secret, or the public key with its alg pinned.
  const old: PreviousSecret =
    record.alg === undefined
      ? { secret: record.secret, validUntil }
      : { alg: record.alg, publicKey: record.publicKey, validUntil };
  const previous = (graceMs > 0 ? [old, ...kept] : kept).slice(0, MAX_PREVIOUS_SECRETS);
  const secret = generateSecret(secretPrefix);
  const { previousSecrets: _p, secret: _s, alg: _a, publicKey: _k, ...rest } = record;
  const next = revalidate({
    ...toExternal({ ...rest, ...(previous.length > 0 && { previousSecrets: previous }) }),
    ...credentialFields({ ...to, alg }, secret),
    updatedAt: new Date(nowMs).toISOString(),
  });
  if (!next.record) return { record, errors: next.errors };
  return { record: next.record, ...(alg === 'HS256' && { secret }), errors: [] };
}

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "300s", "5m", "2h", "7d", "1500ms", or a bare number of seconds. */
export function parseDuration(raw: string): number | undefined {
  const m = /^(\d{1,9})(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!m) return undefined;
  return Number(m[1]) * (UNITS[m[2] ?? 's'] as number);
}
