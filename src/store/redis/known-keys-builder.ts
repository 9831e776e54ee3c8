// Tested in test/e2e/redis-store.test.ts ("mayHaveKey tells names no key has"), test/e2e/redis-cluster.test.ts.
import type { Logger } from 'pino';
import { createKnownKeys, type KnownKeys } from './known-keys.js';

const KNOWN_PAGE = 10_000;
const KNOWN_MIN_CAPACITY = 65_536;

export interface KnownKeysBuilder {
  /** False only for a name the filter in force has never seen; true ("maybe") while none is in force. */
  mayHave(apiKey: string): boolean;
  /** A key that exists now (a change message, or this process's own write). */
  note(apiKey: string): void;
  /** Build a new filter from the index; the one in force is dropped unless `keepCurrent` (it is still complete). */
  rebuild(keepCurrent?: boolean): void;
  /** Changes may have been missed: no filter is trusted until the next rebuild. */
  forget(): void;
}

/**
 * Which apiKeys may exist (known-keys.ts), so that a token naming an unknown key, a flood of random
 * `sub` values above all, costs no Redis read. Trusted only while it is complete and current: built
 * from the index after the subscription is confirmed, with every change message heard since (and
 * this process's own writes) added; dropped when the subscriber closes; rebuilt on "*" (everything
 * changed) and when it outgrows its capacity. Until it is in force, mayHave says "maybe" to all.
 * When it is in force is the change feed's business (change-feed-states.ts): `subscribed()` is asked
 * when a build completes and before a failed one is retried.
 */
export function createKnownKeysBuilder(deps: {
  logger: Logger;
  subscribed: () => boolean;
  countKeys: () => Promise<number>;
  namesAfter: (after: string | undefined, limit: number) => Promise<string[]>;
}): KnownKeysBuilder {
  let known: KnownKeys | null = null;
  let building: KnownKeys | null = null;
  let generation = 0;

  function forget() {
    generation++;
    known = null;
    building = null;
  }
  function note(apiKey: string) {
    building?.add(apiKey);
    if (!known) return;
    known.add(apiKey);
    // Past capacity false positives climb: build a larger one, keeping this one (still complete) meanwhile.
    if (known.added > known.capacity && !building) rebuild(true);
  }
  function rebuild(keepCurrent = false) {
    const mine = ++generation;
    if (!keepCurrent) known = null;
    building = null;
    void (async () => {
      const count = await deps.countKeys();
      if (mine !== generation) return;
      const filter = createKnownKeys({ capacity: Math.max(KNOWN_MIN_CAPACITY, 2 * count) });
      building = filter; // change messages from now on are added while the index is read
      let after: string | undefined;
      for (;;) {
        const page = await deps.namesAfter(after, KNOWN_PAGE);
        if (mine !== generation) return;
        for (const name of page) filter.add(name);
        if (page.length < KNOWN_PAGE) break;
        after = page[page.length - 1];
      }
      if (!deps.subscribed()) return;
      known = filter;
      building = null;
      deps.logger.debug({ keys: filter.added, bytes: filter.bytes }, 'known-keys filter in force');
    })().catch((err: Error) => {
      if (mine !== generation) return;
      deps.logger.warn({ err: err.message }, 'known-keys filter not built; unknown keys are read from redis');
      // Retried while the subscription lasts; until then every lookup reads Redis, as without the filter.
      setTimeout(() => mine === generation && deps.subscribed() && rebuild(keepCurrent), 1_000).unref();
    });
  }
  return {
    mayHave: (apiKey) => known === null || known.mayHave(apiKey),
    note,
    rebuild,
    forget,
  };
}
