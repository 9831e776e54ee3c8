// Tested in test/e2e/keys-file-reload.test.ts, test/e2e/reload-under-traffic.test.ts.
import { secretsOf, type KeyRecord } from '../../keys/key-record.js';
import { sameRecord } from '../../keys/same-record.js';

/** Live keys looked at per slice of the removal scan: about a millisecond of work (20,000 took 27 ms on a loaded 2-core machine), then the event loop runs. */
const SCAN_SLICE = 5_000;

/**
 * A whole new key set built beside the live one while the live one keeps serving, then put in
 * force in one step by its store. It notes, as records arrive, which keys differ from the live
 * set (added or changed); `scan()` finds the removed ones in slices. `touch()` marks a key changed
 * through the store meanwhile (its live record is what was compared, so it must be evicted too).
 * Past `limit` changed keys it stops listing them: announcing each would cost more than a flush.
 */
export interface StagedKeySet {
  add(records: readonly KeyRecord[]): void;
  touch(apiKey: string): void;
  /** Finds the live keys the new set no longer has, yielding between slices (`sync` for small sets, in one go). */
  scan(sync?: boolean): Promise<void> | void;
  readonly next: Map<string, KeyRecord>;
  /** The new set's versions: an unchanged record keeps its version, anything else gets a fresh one. */
  readonly nextVersions: Map<string, number>;
  /** id -> apiKey of the new set (the file's parser already refused a duplicate id). */
  readonly nextIds: Map<string, string>;
  /** secret -> apiKey of the new set (the file's parser already refused a secret held twice). */
  readonly nextSecrets: Map<string, string>;
  /** Keys written through the store while this was staged: they get fresh versions at the swap. */
  readonly touched: ReadonlySet<string>;
  /** The keys to announce after the swap, or null for "everything" (over the limit). */
  changed(): readonly string[] | null;
}

/** How the store numbers versions: the live one of a key, and a fresh one (versions never repeat). */
export interface KeyVersioning {
  versionOf(apiKey: string): number | undefined;
  fresh(): number;
}

export function createStagedKeySet(
  live: ReadonlyMap<string, KeyRecord>,
  limit: number,
  versioning: KeyVersioning,
): StagedKeySet {
  const next = new Map<string, KeyRecord>();
  const nextVersions = new Map<string, number>();
  const nextIds = new Map<string, string>();
  const nextSecrets = new Map<string, string>();
  const touched = new Set<string>();
  let changed: Set<string> | null = new Set();
  const note = (apiKey: string) => {
    if (changed === null) return;
    changed.add(apiKey);
    if (changed.size > limit) changed = null;
  };

  function* slices(): Generator<void> {
    let n = 0;
    for (const apiKey of live.keys()) {
      if (!next.has(apiKey)) note(apiKey);
      if (++n % SCAN_SLICE === 0) yield;
    }
  }

  return {
    next,
    nextVersions,
    nextIds,
    nextSecrets,
    touched,
    add(records) {
      for (const r of records) {
        const old = live.get(r.apiKey);
        const same = old !== undefined && sameRecord(old, r);
        if (!same) note(r.apiKey);
        next.set(r.apiKey, r);
        nextVersions.set(r.apiKey, (same && versioning.versionOf(r.apiKey)) || versioning.fresh());
        nextIds.set(r.id, r.apiKey);
        for (const secret of secretsOf(r)) nextSecrets.set(secret, r.apiKey);
      }
    },
    touch(apiKey) {
      touched.add(apiKey);
      note(apiKey);
    },
    scan(sync = false) {
      const it = slices();
      if (sync) {
        for (;;) if (it.next().done) return;
      }
      return new Promise<void>((resolve) => {
        const step = () => (it.next().done ? resolve() : setImmediate(step));
        step();
      });
    },
    changed: () => (changed === null ? null : [...changed]),
  };
}
