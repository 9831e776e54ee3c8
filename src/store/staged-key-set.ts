import type { KeyRecord } from '../keys/key-record.js';
import { sameRecord } from '../keys/same-record.js';

/** Live keys looked at per slice of the removal scan: a few milliseconds of work, then the event loop runs. */
const SCAN_SLICE = 20_000;

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
  /** The keys to announce after the swap, or null for "everything" (over the limit). */
  changed(): readonly string[] | null;
}

export function createStagedKeySet(live: ReadonlyMap<string, KeyRecord>, limit: number): StagedKeySet {
  const next = new Map<string, KeyRecord>();
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
    add(records) {
      for (const r of records) {
        const old = live.get(r.apiKey);
        if (!old || !sameRecord(old, r)) note(r.apiKey);
        next.set(r.apiKey, r);
      }
    },
    touch: note,
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
