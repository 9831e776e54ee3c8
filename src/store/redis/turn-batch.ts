// Tested in test/adversarial/redis-batching.test.ts, test/adversarial/nonce-set-faults.test.ts, test/e2e/store-contract.test.ts.
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';

/**
 * The answer to one nonce SET: `err` when Redis did not answer it (connection lost, an error
 * reply, not connected), else whether the nonce was new (`+OK`) or already there (nil).
 */
export type NonceSetDone = (err: Error | undefined, first: boolean) => void;

/** `SET <key> 1 PX <ttlMs> NX`, answered through `done` (never a promise per command). */
export type NonceSet = (key: string, ttlMs: number, done: NonceSetDone) => void;

/**
 * One nonce SET waiting for its reply, in the shape ioredis's connection reads from its command
 * queue: its reply parser calls `resolve` with the reply in order, an error reply and a lost
 * connection call `reject` (with `maxRetriesPerRequest: 0`, ioredis fails every command in flight
 * when its connection closes, and resends none). `name` and `args` are what ioredis reads to
 * classify a command and to name it in an error (args left empty: a nonce is no one's business).
 */
class PendingSet {
  readonly name = 'set';
  readonly args: readonly string[] = [];
  constructor(private readonly done: NonceSetDone) {}
  resolve(reply: Buffer | string | null): void {
    if (reply === null) return this.done(undefined, false);
    // Simple strings come as Buffers (ioredis's parser returns buffers): +OK.
    if (reply.length === 2 && String(reply) === 'OK') return this.done(undefined, true);
    this.done(new Error(`unexpected reply to SET NX: ${String(reply).slice(0, 40)}`), false);
  }
  reject(err: Error): void {
    this.done(err, false);
  }
}

/** What of ioredis's connection this module uses: its socket, state and command queue. */
interface RedisInternals {
  status: string;
  stream?: Socket;
  condition?: { select?: number };
  commandQueue: { push(item: { command: PendingSet; stream: Socket; select: number | undefined }): void };
}

/**
 * The request path's one hot command, the nonce's `SET NX PX`, written straight onto the command
 * connection that ioredis keeps (connected, re-resolved through Sentinel after a failover, its
 * replies parsed), without ioredis's per-command machinery: no Command object (args array, a
 * promise and its resolvers, key-prefix and flag handling, a Buffer per argument), no promise
 * at all (callbacks). The commands one event-loop turn issues are written in the check phase
 * (setImmediate, after the poll phase that ran the requests) as one string in one write, and
 * queued for their replies at that moment, in that order: a command ioredis writes in between
 * is queued and written in between too, so replies always meet their commands.
 *
 * Fails closed: a connection that is not ready fails the command at once (as ioredis does
 * without an offline queue); one that is lost by the end of the turn fails the whole batch;
 * ioredis fails every command in flight when its connection closes and hands an error reply
 * to its command. A Cluster has no one connection: it keeps ioredis's own path (request-state.ts).
 */
export function createNonceSet(client: Redis): NonceSet {
  const redis = client as unknown as RedisInternals;
  const keyPrefix = client.options.keyPrefix ?? '';
  let pending: PendingSet[] = [];
  let text = '';
  // The TTL is the same for every request of one receive window: its RESP text is kept.
  let ttlMs = -1;
  let ttlArg = '';

  function flush() {
    const batch = pending;
    const bytes = text;
    pending = [];
    text = '';
    const stream = redis.stream;
    if (redis.status !== 'ready' || stream === undefined || !stream.writable) {
      const err = new Error("Stream isn't writeable (connection not ready)");
      for (const c of batch) c.reject(err);
      return;
    }
    const select = redis.condition?.select;
    for (const command of batch) redis.commandQueue.push({ command, stream, select });
    stream.write(bytes);
  }

  return (key, ttl, done) => {
    if (redis.status !== 'ready') return done(new Error("Stream isn't writeable (connection not ready)"), false);
    if (ttl !== ttlMs) {
      ttlMs = ttl;
      const t = String(ttl);
      ttlArg = `$${t.length}\r\n${t}\r\n`;
    }
    if (pending.length === 0) setImmediate(flush);
    pending.push(new PendingSet(done));
    const k = keyPrefix + key;
    text += `*6\r\n$3\r\nSET\r\n$${Buffer.byteLength(k)}\r\n${k}\r\n$1\r\n1\r\n$2\r\nPX\r\n${ttlArg}$2\r\nNX\r\n`;
  };
}
