import { createHash } from 'node:crypto';
import {
  newKey,
  revokeKey,
  rotateKey,
  updateKey,
  type CredentialInput,
  type KeyChanges,
  type NewKeyInput,
} from '../keys/key-changes.js';
import { keyStatus, type KeyRecord, type KeyStatus } from '../keys/key-record.js';
import type { KeyUsage } from '../keys/key-usage.js';
import type { AuditEntry, Store } from '../store/store.js';

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
    /** A new alg and public key (HS256 → EdDSA); without one, a new credential of the key's alg. */
    to?: CredentialInput,
  ): Promise<Done<{ record: KeyRecord; secret?: string; previousSecretValidUntil: string }>>;
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
 * management API: load, check the state, apply the pure change (keys/key-changes.ts), write
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
    const detail = [record.owner && `owner=${record.owner}`, record.alg && `alg=${record.alg}`]
      .filter(Boolean)
      .join('; ');
    await save(record, 'create', actor, detail || undefined);
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
    async rotate(apiKey, graceMs, actor, reason, to) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      // One reading of the clock: the deadline returned is the one stored with the old secret.
      const t = now();
      if (keyStatus(r.value, t) !== 'active') return conflict('only an active key can be rotated');
      const { record, secret, errors } = rotateKey(r.value, graceMs, t, to);
      if (errors.length > 0) return invalid(errors);
      // The reason is the operator's words, recorded as given (revoke keeps its reason the same way).
      // An alg change is audited as one: old → new.
      const from = r.value.alg ?? 'HS256';
      const algNote = from !== (record.alg ?? 'HS256') ? `; alg=${from}->${record.alg ?? 'HS256'}` : '';
      await save(record, 'rotate', actor, `grace=${graceMs}ms${algNote}${reason ? `; reason=${reason}` : ''}`);
      return done({
        record,
        ...(secret !== undefined && { secret }),
        previousSecretValidUntil: new Date(t + graceMs).toISOString(),
      });
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
