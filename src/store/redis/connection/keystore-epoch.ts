// Tested in test/unit/keystore-epoch.test.ts (the verdicts), test/e2e/keystore-emptied.test.ts (FLUSHDB/FLUSHALL by another client, one server and Cluster).
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { StoreUnavailableError } from '../../store.js';
import type { RedisClient } from './redis-connection.js';

/**
 * The marker's script: the value there, or a new one (ARGV[1]) written when there is none, in one
 * step, so instances that start (or notice an emptied keystore) together all end up with the same
 * epoch: the first one's. Reply: { value, 1 if this call wrote it }.
 */
export const EPOCH_SCRIPT = `
local v = redis.call('GET', KEYS[1])
if v then return {v, 0} end
redis.call('SET', KEYS[1], ARGV[1])
return {ARGV[1], 1}
`;

/** What one reading of the marker means to a process that knew `known` (undefined: none read yet). */
export type EpochVerdict = 'adopt' | 'same' | 'emptied';

export function epochVerdict(known: string | undefined, value: string): EpochVerdict {
  if (known === undefined) return 'adopt';
  // Another value: the one this process knew is gone. Whoever re-created it (this call or another
  // instance's) found nothing there, so the keystore was emptied since the last reading.
  return value === known ? 'same' : 'emptied';
}

export interface KeystoreEpoch {
  /** Reads the marker (writing it if there is none); at connect and on every heartbeat. One at a time. */
  check(): Promise<void>;
  /**
   * Undefined once the marker has been read since the last connect; until then the reading under way, or why
   * it failed (and a new one is started). Nothing is served before: an emptying is noticed only against a
   * marker read before it, and a server that came back empty (a restart without persistence) is noticed
   * before anything is admitted on the new connection.
   */
  refusal(): StoreUnavailableError | Promise<void> | undefined;
  /** A connection is (again) ready: read the marker now, and serve nothing until it has been read. */
  connected(): void;
}

/**
 * An emptied database noticed. `FLUSHDB`/`FLUSHALL` from another application sharing the Redis
 * (or a restart without persistence) removes every nonce and key record while the connection and the
 * server's run_id stay the same, so nothing else tells. Each process reads an epoch marker,
 * `{prefix}{keystore}:epoch` (the keystore's hash tag: the same Cluster slot, so the same master and
 * the same flush, as the key records), at connect and on every heartbeat of the change feed; a value
 * other than the one it knew means the marker was gone, and with it everything written before:
 * `onEmptied` runs (raise the replay fence, flush the key caches, rebuild the known-keys filter) and
 * one line is logged. The script re-creates the marker in the same step, so the next emptying is
 * noticed too, and a process that starts after the marker was written adopts it.
 * The marker is written with the key records' durability (`ensure`, WAIT for the replicas required):
 * a marker lost in a failover would only be taken for an emptied keystore (fail closed).
 */
export function createKeystoreEpoch(
  options: { name: string },
  deps: {
    /** The key operations' connection: the one whose writes `ensure` waits for. */
    client: RedisClient;
    run<T>(fn: () => Promise<T>): Promise<T>;
    ensure(keys: readonly string[]): Promise<void>;
    logger: Logger;
    onEmptied(): void;
  },
): KeystoreEpoch {
  deps.client.defineCommand('keygateEpoch', { numberOfKeys: 1, lua: EPOCH_SCRIPT });
  const script = (deps.client as unknown as { keygateEpoch(key: string, value: string): Promise<[string, number]> })
    .keygateEpoch;
  let known: string | undefined;
  /** The marker was read since the last connect. */
  let current = false;
  /** Counts connects: a reading sent before the last one does not make the marker current. */
  let generation = 0;
  let inFlight: Promise<void> | undefined;
  let failure: StoreUnavailableError | undefined;

  async function read() {
    const g = generation;
    const [value, wrote] = await deps.run(() =>
      script.call(deps.client, options.name, randomBytes(12).toString('hex')),
    );
    const verdict = epochVerdict(known, value);
    known = value;
    if (verdict === 'emptied') deps.onEmptied();
    if (g === generation) current = true;
    if (verdict === 'emptied') {
      deps.logger.error(
        { marker: options.name },
        'redis keystore emptied (its epoch marker was gone: a FLUSHDB/FLUSHALL, or a restart without persistence): ' +
          'replay fence raised, key caches flushed, known-keys filter rebuilt, marker re-created; ' +
          'keys must be restored, and Keygate wants a Redis (or database number) of its own (docs/redis.md)',
      );
    }
    // Not awaited: nothing waits for the replicas (requests wait for this reading). Not replicated in time,
    // a failover may lose it, and that reads as an emptied keystore (fail closed).
    if (wrote === 1)
      deps
        .ensure([options.name])
        .catch((err: Error) =>
          deps.logger.debug({ err: err.message }, 'keystore epoch marker not yet on the replicas'),
        );
  }

  function check() {
    // A heartbeat while a reading is under way (Redis slow): that reading answers for both.
    inFlight ??= read()
      .then(
        () => void (failure = undefined),
        (err: Error) => {
          failure = new StoreUnavailableError(`redis keystore epoch not read: ${err.message}`, { cause: err });
          deps.logger.debug({ err: err.message }, 'keystore epoch marker not read');
        },
      )
      .finally(() => (inFlight = undefined));
    return inFlight;
  }

  return {
    check,
    refusal() {
      if (current) return undefined;
      if (inFlight !== undefined) return inFlight;
      const f = failure;
      const p = check();
      return f ?? p;
    },
    connected() {
      current = false;
      generation++;
      // A reading sent before the reconnect answers for the old connection: read again after it.
      void (inFlight ?? Promise.resolve()).then(check);
    },
  };
}
