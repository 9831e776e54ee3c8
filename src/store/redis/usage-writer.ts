// Tested in test/e2e/usage-batching.test.ts.
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { oldestKeptDay } from '../../keys/key-usage.js';
import { createPendingFieldsOf, type Outcome } from '../../keys/outcome-usage.js';
import { StoreUnavailableError } from '../store.js';
import { createUsageCounter, type UsageBatch } from './usage-counter.js';

export interface UsageWriter {
  /** Counts one admitted request of the key, now, and its route's cost (1 when absent). */
  count(apiKey: string, cost?: number): void;
  /** Counts one answered request of a verified key by outcome, under the key and its owner (keys/outcome-usage.ts). */
  countOutcome(apiKey: string, owner: string | undefined, outcome: Outcome): void;
  /** Writes what is pending; rejects with StoreUnavailableError when a batch failed (it is kept). */
  flush(): Promise<void>;
  /** Forgets the key's pending counts (the key was deleted). */
  drop(apiKey: string): void;
  /** Stops the timer and writes what is pending (graceful shutdown); logs what could not be written. */
  close(): Promise<void>;
}

/**
 * Usage counted in this process and written once per interval: a crash loses at
 * most the last interval's counts; close() (graceful shutdown, SIGTERM) writes them first.
 * A failed write keeps its counts for the next flush (logged with how many requests wait).
 * `write` stores one batch (usage-flush-script.ts in Redis) under the store's deadline.
 */
export function createUsageWriter(
  options: { flushMs: number },
  deps: {
    clock: Clock;
    logger: Logger;
    /** Writes one batch: a key's (its daily counts and outcomes) or an owner's (its outcomes). */
    write: (batch: UsageBatch, kind: 'key' | 'owner', oldestDay: string, nowMs: number) => Promise<unknown>;
  },
): UsageWriter {
  const counter = createUsageCounter();
  // An owner's outcomes, summed over its keys in this process: batches of their own, on the owner's slot.
  const owners = createUsageCounter();
  const fieldsOf = createPendingFieldsOf();

  async function writeBatches(): Promise<number> {
    const batches = counter.take();
    const ownerBatches = owners.take();
    if (batches.length === 0 && ownerBatches.length === 0) return 0;
    const nowMs = deps.clock.nowMs();
    const oldest = oldestKeptDay(nowMs);
    const results = await Promise.allSettled([
      ...batches.map((b) => deps.write(b, 'key', oldest, nowMs)),
      ...ownerBatches.map((b) => deps.write(b, 'owner', oldest, nowMs)),
    ]);
    let failed = 0;
    results.forEach((r, i) => {
      if (r.status !== 'fulfilled') failed++;
      else if (i < batches.length) counter.done(batches[i] as UsageBatch);
      else owners.done(ownerBatches[i - batches.length] as UsageBatch);
    });
    if (failed > 0) {
      const requests = counter.pendingRequests();
      deps.logger.warn(
        { keys: failed, requests },
        'usage write to redis failed; the counts are kept for the next flush',
      );
    }
    return failed;
  }

  // One flush at a time; a caller waits for the flush that takes the counts made before its call.
  let flushing: Promise<number> = Promise.resolve(0);
  async function flush() {
    flushing = flushing.then(writeBatches, writeBatches);
    const failed = await flushing;
    if (failed > 0) throw new StoreUnavailableError(`redis: usage of ${failed} key(s) not written; kept for later`);
  }
  const timer = setInterval(() => {
    flush().catch(() => {}); // logged in writeBatches; retried next interval
  }, options.flushMs);
  timer.unref();

  return {
    count: (apiKey, cost) => counter.count(apiKey, deps.clock.nowMs(), cost),
    countOutcome(apiKey, owner, outcome) {
      const fields = fieldsOf(deps.clock.nowMs())[outcome] as readonly string[];
      counter.countFields(apiKey, fields);
      if (owner !== undefined) owners.countFields(owner, fields);
    },
    flush,
    drop: (apiKey) => counter.drop(apiKey),
    async close() {
      clearInterval(timer);
      await flush().catch((err: Error) =>
        deps.logger.error(
          { err: err.message, requests: counter.pendingRequests() },
          'usage not written to redis at shutdown; lost',
        ),
      );
    },
  };
}
