import { randomBytes } from 'node:crypto';
import { generateKeyMaterial, MAX_PREVIOUS_SECRETS, parseKeyRecord, toExternal, type KeyRecord } from './key-record.js';
import type { RateLimitSpec } from '../policy/rate-limit-spec.js';

/**
 * Every change an operator can make to a key, as pure functions of
 * (record, input, now): the key model's side of a change. The key operations
 * (src/management/key-operations.ts) load, check state, write and audit around
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
}

export type KeyChangeResult = { record: KeyRecord; errors: [] } | { record?: undefined; errors: string[] };

function revalidate(o: Record<string, unknown>): KeyChangeResult {
  const { record, errors } = parseKeyRecord(o, 'key');
  return record ? { record, errors: [] } : { errors };
}

/** What only a new key has: its owner, set at creation and never changed. */
export interface NewKeyInput extends KeyChanges {
  owner?: string;
}

export function newKey(changes: NewKeyInput, nowMs: number): KeyChangeResult {
  const m = generateKeyMaterial();
  return revalidate({
    apiKey: m.apiKey,
    apiSecret: m.secret,
    id: m.id,
    ...(changes.owner !== undefined && { owner: changes.owner }),
    scopes: changes.scopes ?? [],
    allowIps: changes.allowIps ?? [],
    label: changes.label,
    createdAt: new Date(nowMs).toISOString(),
    ...(changes.expiresAt && { expiresAt: changes.expiresAt }),
    ...(changes.rateLimit && { rateLimit: changes.rateLimit }),
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
 * Issues a new secret. The old one stays valid for `graceMs` (0 = stops at
 * once); earlier secrets still inside their own grace are kept, expired ones dropped, and at
 * most MAX_PREVIOUS_SECRETS in all (the oldest go first).
 */
export function rotateKey(record: KeyRecord, graceMs: number, nowMs: number): { record: KeyRecord; secret: string } {
  const secret = randomBytes(32).toString('base64url');
  const kept = (record.previousSecrets ?? []).filter((p) => Date.parse(p.validUntil) > nowMs);
  const previous = (
    graceMs > 0 ? [{ secret: record.secret, validUntil: new Date(nowMs + graceMs).toISOString() }, ...kept] : kept
  ).slice(0, MAX_PREVIOUS_SECRETS);
  const { previousSecrets: _p, ...rest } = record;
  return {
    secret,
    record: {
      ...rest,
      secret,
      updatedAt: new Date(nowMs).toISOString(),
      ...(previous.length > 0 && { previousSecrets: previous }),
    },
  };
}

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "300s", "5m", "2h", "7d", "1500ms", or a bare number of seconds. */
export function parseDuration(raw: string): number | undefined {
  const m = /^(\d{1,9})(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!m) return undefined;
  return Number(m[1]) * (UNITS[m[2] ?? 's'] as number);
}
