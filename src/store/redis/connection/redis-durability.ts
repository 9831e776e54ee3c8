// Tested in test/e2e/durable-key-changes.test.ts.
import { Cluster, type Redis } from 'ioredis';
import { DurabilityError } from '../../store.js';

export interface DurabilityOptions {
  /** Replicas that must acknowledge a key change before it is answered (0 = do not wait). */
  readonly minReplicas: number;
  /** How long Redis waits for them (WAIT's timeout), in ms. */
  readonly timeoutMs: number;
  /** Extra client-side allowance beyond timeoutMs for the reply to arrive, in ms. */
  readonly replyMarginMs: number;
}

export interface Durability {
  readonly minReplicas: number;
  /**
   * Resolves once `minReplicas` replicas have every write this connection made so far, on the
   * node of each of `keys` (a Cluster spreads one change over several masters); throws
   * DurabilityError otherwise. Must run on the connection that made the writes: WAIT counts the
   * writes of its own connection only.
   */
  ensure(keys: readonly string[]): Promise<void>;
}

/**
 * Durable key changes: `WAIT <minReplicas> <timeoutMs>` after the write, on the writing connection.
 * WAIT blocks that connection, so the Redis store gives key changes a connection of their own
 * (the request path's admits never queue behind it). WAITAOF (fsync) is not offered: it needs
 * Redis 7.2, and the versions this suite runs against (7.0) answer it with an unknown command.
 */
export function createDurability(options: DurabilityOptions, deps: { client: Redis | Cluster }): Durability {
  const { minReplicas, timeoutMs } = options;
  const client = deps.client;
  const isCluster = client instanceof Cluster;

  async function waitOn(key: string | undefined): Promise<number> {
    if (!isCluster || key === undefined) return Number(await client.call('WAIT', minReplicas, timeoutMs));
    // A keyed read first routes the pipeline to the key's master, on the connection that wrote it.
    const replies = await client.pipeline().pttl(key).call('WAIT', minReplicas, timeoutMs).exec();
    const [err, acked] = replies?.[1] ?? [new Error('no reply to WAIT'), 0];
    if (err) throw err;
    return Number(acked);
  }

  return {
    minReplicas,
    async ensure(keys) {
      if (minReplicas === 0) return;
      const targets = isCluster ? [...new Set(keys)] : [undefined];
      const acks = await withDeadline(Promise.all(targets.map(waitOn)), timeoutMs + options.replyMarginMs, minReplicas);
      const fewest = Math.min(...acks);
      if (fewest < minReplicas) throw new DurabilityError(minReplicas, fewest);
    },
  };
}

/** `p`, or a DurabilityError after `ms` or on any failure: the write happened, its durability is unknown. */
function withDeadline<T>(p: Promise<T>, ms: number, required: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DurabilityError(required, 0)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(new DurabilityError(required, 0, { cause: err }));
      },
    );
  });
}
