import { createHash, randomBytes } from 'node:crypto';
import {
  generateKeyMaterial,
  keyStatus,
  parseKeyRecord,
  toExternal,
  type KeyRecord,
  type KeyStatus,
} from '../keys/key-record.js';
import type { KeyUsage } from '../keys/key-usage.js';
import type { RateLimitSpec } from '../policy/rate-limit-spec.js';
import type { AuditEntry, Store } from '../store/store.js';

/**
 * Every change an operator can make to a key, as pure functions of
 * (record, input, now). The CLI applies them; tests drive them with a clock.
 * Each result is re-validated with parseKeyRecord.
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

type Result = { record: KeyRecord; errors: [] } | { record?: undefined; errors: string[] };

function revalidate(o: Record<string, unknown>): Result {
  const { record, errors } = parseKeyRecord(o, 'key');
  return record ? { record, errors: [] } : { errors };
}

/** What only a new key has: its owner, set at creation and never changed. */
export interface NewKeyInput extends KeyChanges {
  owner?: string;
}

export function newKey(changes: NewKeyInput, nowMs: number): Result {
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

export function updateKey(record: KeyRecord, changes: KeyChanges, nowMs: number): Result {
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
 * once); earlier secrets still inside their own grace are kept, expired ones dropped.
 */
export function rotateKey(record: KeyRecord, graceMs: number, nowMs: number): { record: KeyRecord; secret: string } {
  const secret = randomBytes(32).toString('base64url');
  const kept = (record.previousSecrets ?? []).filter((p) => Date.parse(p.validUntil) > nowMs);
  const previous =
    graceMs > 0 ? [{ secret: record.secret, validUntil: new Date(nowMs + graceMs).toISOString() }, ...kept] : kept;
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

/** Why an operation did nothing: data, so the CLI prints it and the API renders it (404, 400, 409). */
export type Refusal =
  | { readonly ok: false; readonly refused: 'not_found' }
  | { readonly ok: false; readonly refused: 'invalid'; readonly problems: readonly string[] }
  | { readonly ok: false; readonly refused: 'conflict'; readonly message: string };
export type Done<T> = { readonly ok: true; readonly value: T } | Refusal;

const done = <T>(value: T): Done<T> => ({ ok: true, value });
const notFound: Refusal = Object.freeze({ ok: false, refused: 'not_found' });
const invalid = (problems: readonly string[]): Refusal => ({ ok: false, refused: 'invalid', problems });
const conflict = (message: string): Refusal => ({ ok: false, refused: 'conflict', message });

export interface KeyFilter {
  owner?: string;
  /** The effective status: active, revoked or expired. */
  state?: KeyStatus;
}

/** Sent with a create: a retried create with the same key (from the same actor) returns the first key. */
export interface Idempotency {
  readonly key: string;
  /** Anything that identifies the request body: the same key with another body is refused. */
  readonly body: string;
}

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

export interface KeyOperations {
  get(apiKey: string): Promise<Done<KeyRecord>>;
  /** Every matching key, in a stable order (by apiKey). */
  list(filter: KeyFilter): Promise<KeyRecord[]>;
  create(
    input: NewKeyInput,
    actor: string,
    idempotency?: Idempotency,
  ): Promise<Done<{ record: KeyRecord; replayed: boolean }>>;
  update(apiKey: string, changes: KeyChanges, actor: string): Promise<Done<KeyRecord>>;
  rotate(
    apiKey: string,
    graceMs: number,
    actor: string,
    reason?: string,
  ): Promise<Done<{ record: KeyRecord; secret: string; previousSecretValidUntil: string }>>;
  revoke(apiKey: string, reason: string | undefined, actor: string): Promise<Done<KeyRecord>>;
  remove(apiKey: string, actor: string): Promise<Done<KeyRecord>>;
  usage(apiKey: string): Promise<Done<{ record: KeyRecord; usage: KeyUsage }>>;
  /** The record parser's problems with a create, writing nothing (to list every problem of a request at once). */
  check(input: NewKeyInput): readonly string[];
  /** The same for an update of `record`. */
  checkUpdate(record: KeyRecord, changes: KeyChanges): readonly string[];
  /** Writes a record as it is (import, reencrypt), published and audited like every other change. */
  save(record: KeyRecord, action: string, actor: string, detail?: string): Promise<void>;
}

/**
 * The one code path for key changes, shared by `keygate keys` and the
 * management API: load, check the state, apply the pure step above, write
 * (the store publishes the change to every instance), audit. Both callers
 * get the same validation, the same refusals and the same audit entries.
 */
export function createKeyOperations(deps: {
  store: Store;
  now: () => number;
  audit: (entry: AuditEntry) => void;
}): KeyOperations {
  const { store, now } = deps;
  const audit = async (record: Pick<KeyRecord, 'apiKey' | 'id'>, action: string, actor: string, detail?: string) => {
    const entry: AuditEntry = {
      at: new Date(now()).toISOString(),
      actor,
      action,
      apiKey: record.apiKey,
      id: record.id,
      ...(detail && { detail }),
    };
    deps.audit(entry);
    await store.appendAudit(entry);
  };
  const save = async (record: KeyRecord, action: string, actor: string, detail?: string) => {
    await store.putKey(record);
    await audit(record, action, actor, detail);
  };
  const load = async (apiKey: string): Promise<Done<KeyRecord>> => {
    const r = await store.getKey(apiKey);
    return r ? done(r) : notFound;
  };
  const writeNew = async (record: KeyRecord, actor: string) => {
    await save(record, 'create', actor, record.owner && `owner=${record.owner}`);
    return done({ record, replayed: false });
  };

  return {
    get: load,
    save,
    check: (input) => newKey(input, now()).errors,
    checkUpdate: (record, changes) => updateKey(record, changes, now()).errors,
    async list(filter) {
      const t = now();
      return (await store.listKeys())
        .filter(
          (r) =>
            (filter.owner === undefined || r.owner === filter.owner) &&
            (filter.state === undefined || keyStatus(r, t) === filter.state),
        )
        .sort((a, b) => (a.apiKey < b.apiKey ? -1 : a.apiKey > b.apiKey ? 1 : 0));
    },
    async create(input, actor, idempotency) {
      const { record, errors } = newKey(input, now());
      if (!record) return invalid(errors);
      if (!idempotency) return writeNew(record, actor);
      // Per actor: another token's retry key never finds this key (or its secret).
      const name = createHash('sha256').update(`${actor}\0${idempotency.key}`).digest('hex');
      const bodyHash = createHash('sha256').update(idempotency.body).digest('hex');
      const prior = await store.claimOnce(`idempotency:${name}`, `${record.apiKey} ${bodyHash}`, IDEMPOTENCY_TTL_MS);
      if (prior === null) return writeNew(record, actor);
      const [apiKey = '', hash] = prior.split(' ');
      if (hash !== bodyHash) return conflict('this Idempotency-Key was used with a different request body');
      // The first request may still be between its claim and its write.
      for (let i = 0; i < 20; i++) {
        const first = await store.getKey(apiKey);
        if (first) return done({ record: first, replayed: true });
        await new Promise((r) => setTimeout(r, 50));
      }
      return conflict('the key made with this Idempotency-Key no longer exists');
    },
    async update(apiKey, changes, actor) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      if (r.value.state === 'revoked') return conflict('the key is revoked: a revoked key cannot be changed');
      const { record, errors } = updateKey(r.value, changes, now());
      if (!record) return invalid(errors);
      await save(record, 'update', actor, Object.keys(changes).join(','));
      return done(record);
    },
    async rotate(apiKey, graceMs, actor, reason) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      // One reading of the clock: the deadline returned is the one stored with the old secret.
      const t = now();
      if (keyStatus(r.value, t) !== 'active') return conflict('only an active key can be rotated');
      const { record, secret } = rotateKey(r.value, graceMs, t);
      // The reason is the operator's words, recorded as given (revoke keeps its reason the same way).
      await save(record, 'rotate', actor, reason ? `grace=${graceMs}ms; reason=${reason}` : `grace=${graceMs}ms`);
      return done({ record, secret, previousSecretValidUntil: new Date(t + graceMs).toISOString() });
    },
    async revoke(apiKey, reason, actor) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      if (r.value.state === 'revoked') return conflict('the key is already revoked');
      const record = revokeKey(r.value, reason, now());
      await save(record, 'revoke', actor, reason);
      return done(record);
    },
    async remove(apiKey, actor) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      await store.deleteKey(apiKey);
      await audit(r.value, 'delete', actor);
      return r;
    },
    async usage(apiKey) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      return done({ record: r.value, usage: await store.getUsage(apiKey) });
    },
  };
}
