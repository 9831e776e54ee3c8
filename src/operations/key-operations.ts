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
import { keyStatus, type KeyRecord } from '../keys/key-record.js';
import type { KeyUsage } from '../keys/key-usage.js';
import { hasUnprintable, PRINTABLE_RULE } from '../keys/printable-text.js';
import type { KeyClaim, KeyWrite, KeyWriteResult, VersionedKey } from '../store/key-write.js';
import { createKeyListing, type KeyFilter, type KeyPage, type PageRequest } from './key-listing.js';
import { StoreUnavailableError, type AuditEntry, type Store } from '../store/store.js';
import { conflict, done, invalid, notFound, type Done, type Refusal } from './outcome.js';

/** A refused compare-and-set in words: what the operator sees (409 / exit 1). */
function refusedWrite(r: Exclude<KeyWriteResult, { ok: true }>): Refusal {
  if (r.conflict === 'claimed') return conflict('this Idempotency-Key was already used');
  if (r.conflict === 'id_taken')
    return conflict(`id ${JSON.stringify(r.id)} is already the id of key ${r.holder}: an id names one key`);
  if (r.conflict === 'revoked')
    return conflict(`key ${r.apiKey} is revoked: a revoked key cannot be changed back`, r.version);
  return conflict(
    `key ${r.apiKey} changed while this change was made (now version ${r.version}): read it and retry`,
    r.version,
  );
}

/** How many times a change that may be re-applied (patch, revoke, delete) is retried on a fresh read. */
const RETRIES = 8;

/**
 * Keys one import step writes at most: one atomic script call in Redis, which blocks every other
 * command (every proxied request's admission) while it runs. The script costs about 30 µs of Redis
 * per new key (2 shared cores, INFO commandstats): 100 keys hold Redis about 3 ms, one call of
 * 10,000 keys 200–360 ms; 100k keys import as fast in steps of 100 as in steps of 1,000 (7–9 s).
 * The head reads go in pages of the same size.
 */
export const IMPORT_BATCH = 100;

/** What an import did. */
export interface ImportReport {
  /** Keys in the file. */
  readonly total: number;
  readonly created: number;
  readonly replaced: number;
  readonly skipped: number;
  /**
   * Set when the import stopped before its end (a later batch refused, or the store failed): why.
   * The counts are the batches applied before; nothing after them was written, except that a batch
   * whose commit failed (timeout, replicas) may or may not have been. Re-running the same import is
   * safe: without replace it skips the keys already there, with replace it writes them again.
   */
  readonly stopped?: string;
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
  /** One page of the matching keys, in apiKey order, read from the store's indexes (only that page). */
  list(filter: KeyFilter, page: PageRequest): Promise<KeyPage>;
  /** Every matching key, page by page (the CLI's whole list, export, reseal). */
  listAll(filter: KeyFilter): AsyncGenerator<readonly KeyRecord[]>;
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
  /**
   * Adds the records (a keys file, already validated whole by its reader) in batches of at most
   * `importBatch` keys, each one atomic compare-and-set step with its audit entries. Existing keys
   * are skipped unless `replace`. A refusal (an id another key holds, a key that changed meanwhile)
   * or a store failure before any key was written is returned or thrown as for any change: nothing
   * was written, so a file of at most one batch is all or nothing. After that, it stops the import:
   * the report says what was applied and why it stopped (`stopped`); a re-run is safe.
   */
  importKeys(
    records: readonly KeyRecord[],
    replace: boolean,
    actor: string,
    /** Called after each step with the keys it covered (the CLI's progress). */
    onStep?: (keys: number) => void,
  ): Promise<Done<ImportReport>>;
  /** Re-writes every key as it is (so its secrets are sealed with the current key), each as a compare-and-set. */
  reseal(actor: string): Promise<number>;
}

/**
 * The one code path for key changes, shared by `keygate keys` and the
 * management API: read the key with its version, check its state, apply the pure
 * change (keys/key-changes.ts), then commit it as a compare-and-set with its audit
 * entry (the store checks the version, keeps revocation final and ids unique, and
 * publishes the change, in one atomic step). A change that can be re-applied to a
 * fresh read (patch, revoke, delete) is retried when another change landed first;
 * a rotate is not (its caller must learn the chain moved on): 409 with the version.
 * Longer than 80 lines on purpose: one short closure per operation over the shared read, decide and
 * commit steps (`change`, `commit`, `entry`); paging is key-listing.ts.
 */
export function createKeyOperations(deps: {
  store: Store;
  now: () => number;
  audit: (entry: AuditEntry) => void;
  /** Keys per import step (default IMPORT_BATCH; tests use small ones). */
  importBatch?: number;
}): KeyOperations {
  const { store, now } = deps;
  const importBatch = deps.importBatch ?? IMPORT_BATCH;
  const entry = (r: Pick<KeyRecord, 'apiKey' | 'id'>, action: string, actor: string, detail?: string): AuditEntry => ({
    at: new Date(now()).toISOString(),
    actor,
    action,
    apiKey: r.apiKey,
    id: r.id,
    ...(detail && { detail }),
  });
  /** Commits writes with their audit entries; the log lines follow only a commit that happened. */
  const commit = async (writes: KeyWrite[], audit: AuditEntry[], claim?: KeyClaim) => {
    const result = await store.commitKeyChanges({ writes, audit, ...(claim && { claim }) });
    if (result.ok) for (const a of audit) deps.audit(a);
    return result;
  };
  const load = async (apiKey: string): Promise<Done<KeyRecord>> => {
    const r = await store.readKey(apiKey);
    return r ? done(r.record) : notFound;
  };

  const { list, listAll } = createKeyListing({ store, now });

  type Decision = Done<{ next: KeyRecord | null; detail?: string }>;
  /** Read, decide, compare-and-set; `retry` re-reads and decides again when another change landed first. */
  async function change(
    apiKey: string,
    action: string,
    actor: string,
    retry: boolean,
    decide: (current: KeyRecord) => Decision,
  ): Promise<Done<{ before: KeyRecord; after: KeyRecord | null }>> {
    for (let attempt = 0; ; attempt++) {
      const current = await store.readKey(apiKey);
      if (!current) return notFound;
      const d = decide(current.record);
      if (!d.ok) return d;
      const audit = entry(d.value.next ?? current.record, action, actor, d.value.detail);
      const result = await commit([{ apiKey, expect: current.version, next: d.value.next }], [audit]);
      if (result.ok) return done({ before: current.record, after: d.value.next });
      if (result.conflict === 'version' && result.version === 0) return notFound;
      if (result.conflict !== 'version' || !retry || attempt + 1 >= RETRIES) return refusedWrite(result);
    }
  }
  const after = (r: Done<{ after: KeyRecord | null }>): Done<KeyRecord> =>
    r.ok ? done(r.value.after as KeyRecord) : r;

  async function writeNew(record: KeyRecord, actor: string, claim?: KeyClaim): Promise<KeyWriteResult> {
    // The alg is audited with the key it was made with; an HS256 key's entry reads as before.
    const detail = [record.owner && `owner=${record.owner}`, record.alg && `alg=${record.alg}`]
      .filter(Boolean)
      .join('; ');
    const audit = entry(record, 'create', actor, detail || undefined);
    return commit([{ apiKey: record.apiKey, expect: 0, next: record }], [audit], claim);
  }
  const created = (record: KeyRecord) => done({ record, replayed: false });

  /**
   * A create retried with an Idempotency-Key already used: the first answer again, but only while
   * it is still true. The key must be at the version the first create wrote (so its secret is the
   * one that create returned, never a later one); a key rotated, revoked, changed or deleted since
   * is 409 naming it. A replay changes nothing and is audited like a change.
   */
  async function replay(
    claimed: string,
    bodyHash: string,
    actor: string,
  ): Promise<Done<{ record: KeyRecord; replayed: boolean }>> {
    // "<version> <apiKey> <bodyHash> <id>" (key-write.ts claimedValue; an id may hold spaces).
    const [version = '', apiKey = '', hash = '', ...idParts] = claimed.split(' ');
    const id = idParts.join(' ');
    if (hash !== bodyHash) return conflict('this Idempotency-Key was used with a different request body');
    const named = `key ${apiKey} (id ${JSON.stringify(id)})`;
    const current = await store.readKey(apiKey);
    if (!current) return conflict(`${named}, made with this Idempotency-Key, no longer exists`, 0);
    if (current.version !== Number(version))
      return conflict(
        `${named}, made with this Idempotency-Key, changed since (now version ${current.version}): ` +
          'its first answer is no longer true and its secret is not shown again; read the key instead',
        current.version,
      );
    const audit = entry(current.record, 'create-replay', actor);
    await store.appendAudit(audit);
    deps.audit(audit);
    return done({ record: current.record, replayed: true });
  }

  return {
    get: load,
    check: (input) => newKey(input, now()).errors,
    checkUpdate: (record, changes) => updateKey(record, changes, now()).errors,
    list,
    listAll,
    async create(input, actor, idempotency) {
      const { record, errors } = newKey(input, now());
      if (!record) return invalid(errors);
      if (!idempotency) {
        const r = await writeNew(record, actor);
        return r.ok ? created(record) : refusedWrite(r);
      }
      // Per actor: another token's retry key never finds this key (or its secret).
      const name = `idempotency:${createHash('sha256').update(`${actor}\0${idempotency.key}`).digest('hex')}`;
      const bodyHash = createHash('sha256').update(idempotency.body).digest('hex');
      // The claim lands with the key in one atomic step, or not at all: a create that failed
      // (timeout, error) leaves nothing behind, and its retry creates the key (or, if the first
      // write landed after all, finds it here).
      const claim = { name, value: `${record.apiKey} ${bodyHash} ${record.id}`, ttlMs: IDEMPOTENCY_TTL_MS };
      const r = await writeNew(record, actor, claim);
      if (r.ok) return created(record);
      return r.conflict === 'claimed' ? replay(r.value, bodyHash, actor) : refusedWrite(r);
    },
    async update(apiKey, changes, actor) {
      const r = await change(apiKey, 'update', actor, true, (current) => {
        if (current.state === 'revoked') return conflict('the key is revoked: a revoked key cannot be changed');
        const { record, errors } = updateKey(current, changes, now());
        return record ? done({ next: record, detail: Object.keys(changes).join(',') }) : invalid(errors);
      });
      return after(r);
    },
    async rotate(apiKey, graceMs, actor, reason, to) {
      if (reason !== undefined && hasUnprintable(reason)) return invalid([`key.reason: ${PRINTABLE_RULE}`]);
      // One reading of the clock: the deadline returned is the one stored with the old secret.
      const t = now();
      let secret: string | undefined;
      const r = await change(apiKey, 'rotate', actor, false, (current) => {
        if (keyStatus(current, t) !== 'active') return conflict('only an active key can be rotated');
        const rotated = rotateKey(current, graceMs, t, to);
        if (rotated.errors.length > 0) return invalid(rotated.errors);
        secret = rotated.secret;
        // The reason is the operator's words, recorded as given (revoke keeps its reason the same way).
        // An alg change is audited as one: old -> new.
        const from = current.alg ?? 'HS256';
        const into = rotated.record.alg ?? 'HS256';
        const algNote = from !== into ? `; alg=${from}->${into}` : '';
        return done({
          next: rotated.record,
          detail: `grace=${graceMs}ms${algNote}${reason ? `; reason=${reason}` : ''}`,
        });
      });
      if (!r.ok) return r;
      return done({
        record: r.value.after as KeyRecord,
        ...(secret !== undefined && { secret }),
        previousSecretValidUntil: new Date(t + graceMs).toISOString(),
      });
    },
    async revoke(apiKey, reason, actor) {
      // The reason is kept on the key (revokeReason) and printed by keys list: the record's text rule.
      if (reason !== undefined && hasUnprintable(reason)) return invalid([`key.reason: ${PRINTABLE_RULE}`]);
      const r = await change(apiKey, 'revoke', actor, true, (current) =>
        current.state === 'revoked'
          ? conflict('the key is already revoked')
          : done({ next: revokeKey(current, reason, now()), ...(reason && { detail: reason }) }),
      );
      return after(r);
    },
    async remove(apiKey, actor) {
      const r = await change(apiKey, 'delete', actor, true, () => done({ next: null }));
      return r.ok ? done(r.value.before) : r;
    },
    async usage(apiKey) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      return done({ record: r.value, usage: await store.getUsage(apiKey) });
    },
    async importKeys(records, replace, actor, onStep) {
      const counts = { total: records.length, created: 0, replaced: 0, skipped: 0 };
      // Batch by batch: each reads its heads just before its compare-and-set, so a batch checks
      // versions as fresh as a single change does, and no call carries more than importBatch keys.
      for (let start = 0; start < records.length; start += importBatch) {
        const batch = records.slice(start, start + importBatch);
        const step = { created: 0, replaced: 0, skipped: 0 };
        let result: KeyWriteResult | undefined;
        try {
          const heads = await Promise.all(batch.map((r) => store.readKey(r.apiKey)));
          // A key's owner never changes (docs/keys.md): its nonces live in its owner's slot
          // (store/redis/request-state.ts), so a new owner would forget every nonce used so far and
          // admit a used token again. Checked against the heads the compare-and-set starts from.
          const moved = replace ? batch.findIndex((r, i) => heads[i] && heads[i].record.owner !== r.owner) : -1;
          if (moved >= 0) {
            const r = batch[moved] as KeyRecord;
            const was = (heads[moved] as VersionedKey).record.owner;
            const refusal = conflict(
              `key ${r.apiKey} has owner ${was === undefined ? '(none)' : JSON.stringify(was)}; the file gives it ` +
                `${r.owner === undefined ? 'none' : JSON.stringify(r.owner)}: an owner never changes ` +
                '(its nonces live under its owner: a used token would pass again); create a new key for the new owner',
            );
            if (counts.created + counts.replaced === 0) return refusal;
            return done({
              ...counts,
              stopped: `${(refusal as { message: string }).message} (nothing of that batch was written)`,
            });
          }
          const writes: KeyWrite[] = [];
          const audit: AuditEntry[] = [];
          batch.forEach((r, i) => {
            const head = heads[i];
            if (head && !replace) return void step.skipped++;
            writes.push({ apiKey: r.apiKey, expect: head?.version ?? 0, next: r });
            audit.push(entry(r, head ? 'import-replace' : 'import', actor));
            if (head) step.replaced++;
            else step.created++;
          });
          if (writes.length > 0) result = await commit(writes, audit);
        } catch (err) {
          // Nothing written yet: the failure as any change reports it. After: what was applied.
          if (!(err instanceof StoreUnavailableError) || counts.created + counts.replaced === 0) throw err;
          return done({
            ...counts,
            stopped: `${err.message} (the keys of the failed batch may or may not have been written)`,
          });
        }
        if (result && !result.ok) {
          const refusal = refusedWrite(result);
          if (counts.created + counts.replaced === 0 || refusal.refused !== 'conflict') return refusal;
          return done({
            ...counts,
            stopped: `${refusal.message} (nothing of that batch of ${batch.length} was written)`,
          });
        }
        counts.created += step.created;
        counts.replaced += step.replaced;
        counts.skipped += step.skipped;
        onStep?.(batch.length);
      }
      return done(counts);
    },
    async reseal(actor) {
      let n = 0;
      for await (const page of listAll({}))
        for (const { apiKey } of page) {
          const r = await change(apiKey, 'reencrypt', actor, true, (current) => done({ next: current }));
          if (r.ok) n++;
        }
      return n;
    },
  };
}
