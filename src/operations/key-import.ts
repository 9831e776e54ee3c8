// Tested in test/unit/key-operations.test.ts, test/process/keys-import.test.ts, test/unit/keys-actions.test.ts.
import type { KeyRecord } from '../keys/key-record.js';
import type { KeyWrite, KeyWriteResult, VersionedKey } from '../store/key-write.js';
import { DELETED_OWNER_KEPT_MS, StoreUnavailableError, type AuditEntry, type KeyRecordStore } from '../store/store.js';
import { refusedWrite, type KeyCommits } from './key-commits.js';
import type { KeyFilter } from './key-listing.js';
import { conflict, done, type Done } from './outcome.js';

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

/** The key operations that go over many keys: a keys file's import, and the reseal of every key. */
export interface KeyImport {
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

/** Import and reseal, made of the same compare-and-set steps as every key change (key-commits.ts). */
export function createKeyImport(
  options: { importBatch: number },
  deps: {
    store: Pick<KeyRecordStore, 'readKey' | 'deletedOwner'>;
    commits: KeyCommits;
    listAll: (filter: KeyFilter) => AsyncGenerator<readonly KeyRecord[]>;
  },
): KeyImport {
  const { store, listAll } = deps;
  const { entry, commit, change } = deps.commits;
  const { importBatch } = options;
  return {
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
          // The same for a key deleted a moment ago and imported again under another owner: its nonces
          // outlive it under its old owner as long as a token may be replayed (Store.deletedOwner).
          const gone = await Promise.all(
            batch.map((r, i) => (heads[i] ? Promise.resolve(undefined) : store.deletedOwner(r.apiKey))),
          );
          const reborn = batch.findIndex((r, i) => gone[i] !== undefined && gone[i] !== (r.owner ?? ''));
          if (moved >= 0 || reborn >= 0) {
            const at = moved >= 0 ? moved : reborn;
            const r = batch[at] as KeyRecord;
            const was = moved >= 0 ? (heads[at] as VersionedKey).record.owner : gone[at] || undefined;
            const had =
              moved >= 0 ? 'has' : `was deleted less than ${Math.ceil(DELETED_OWNER_KEPT_MS / 60_000)} min ago with`;
            const refusal = conflict(
              `key ${r.apiKey} ${had} owner ${was === undefined ? '(none)' : JSON.stringify(was)}; the file gives it ` +
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
