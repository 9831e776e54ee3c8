// Tested in test/adversarial/redis-batching.test.ts, test/adversarial/nonce-set-faults.test.ts, test/e2e/store-contract.test.ts.
import { createHash } from 'node:crypto';
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

/**
 * One script call waiting for its reply (EVALSHA), in the same shape as PendingSet. A NOSCRIPT
 * error reply (a restarted or failed-over server that has not seen the script yet) hands the call
 * to `fallback`, ioredis's own command for the script, which sends it whole and loads it.
 */
class PendingScript {
  readonly name = 'evalsha';
  readonly args: readonly string[] = [];
  constructor(
    private readonly done: ScriptDone,
    private readonly callArgs: ReadonlyArray<string | number>,
    private readonly fallback: ScriptFallback,
  ) {}
  resolve(reply: unknown): void {
    if (Array.isArray(reply)) return this.done(undefined, reply as number[]);
    this.done(new Error('unexpected reply to EVALSHA: not an array'), []);
  }
  reject(err: Error): void {
    if (!err.message.startsWith('NOSCRIPT')) return this.done(err, []);
    this.fallback(this.callArgs).then(
      (reply) => this.resolve(reply),
      (e: unknown) => this.done(e instanceof Error ? e : new Error(String(e)), []),
    );
  }
}

/** The answer to one script call: `err` when Redis did not answer it, else the script's array of integers. */
export type ScriptDone = (err: Error | undefined, reply: number[]) => void;

/**
 * `EVALSHA <sha1 of lua> <numkeys> <keys…> <args…>`, answered through `done`; `args` starts with numkeys, as
 * ioredis's defineCommand without a fixed numberOfKeys takes them.
 */
export type ScriptCall = (args: ReadonlyArray<string | number>, done: ScriptDone) => void;

/** The same call sent through ioredis's command for the script (on NOSCRIPT: it sends the script whole). */
export type ScriptFallback = (args: ReadonlyArray<string | number>) => Promise<unknown>;

/** What of ioredis's connection this module uses: its socket, state and command queue. */
interface RedisInternals {
  status: string;
  stream?: Socket;
  condition?: { select?: number };
  commandQueue: { push(item: { command: Pending; stream: Socket; select: number | undefined }): void };
}

type Pending = PendingSet | PendingScript;

const NOT_READY = "Stream isn't writeable (connection not ready)";

/**
 * The request path's hot commands, written straight onto the command connection that ioredis keeps
 * (connected, re-resolved through Sentinel after a failover, its replies parsed), without ioredis's
 * per-command machinery: no Command object (args array, a promise and its resolvers, key-prefix and
 * flag handling, a Buffer per argument), no auto-pipeline, no promise at all (callbacks). The commands
 * one event-loop turn issues are written in the check phase (setImmediate, after the poll phase that
 * ran the requests) as one string in one write, and queued for their replies at that moment, in that
 * order: a command ioredis writes in between is queued and written in between too, so replies always
 * meet their commands.
 *
 * Fails closed: a connection that is not ready fails the command at once (as ioredis does
 * without an offline queue); one that is lost by the end of the turn fails the whole batch;
 * ioredis fails every command in flight when its connection closes and hands an error reply
 * to its command. A Cluster has no one connection: it keeps ioredis's own path (request-state.ts).
 */
function createTurnWriter(client: Redis) {
  const redis = client as unknown as RedisInternals;
  let pending: Pending[] = [];
  let text = '';

  function flush() {
    const batch = pending;
    const bytes = text;
    pending = [];
    text = '';
    const stream = redis.stream;
    if (redis.status !== 'ready' || stream === undefined || !stream.writable) {
      const err = new Error(NOT_READY);
      for (const c of batch) c.reject(err);
      return;
    }
    const select = redis.condition?.select;
    for (const command of batch) redis.commandQueue.push({ command, stream, select });
    stream.write(bytes);
  }

  return {
    ready: () => redis.status === 'ready',
    /** Queues one command's RESP text and the object its reply goes to, for this turn's write. */
    add(command: Pending, resp: string) {
      if (pending.length === 0) setImmediate(flush);
      pending.push(command);
      text += resp;
    },
  };
}

/** `$<byte length>\r\n<value>\r\n`: one RESP bulk string. */
const bulk = (value: string) => `$${Buffer.byteLength(value)}\r\n${value}\r\n`;

/** The request path's nonce SET and admit script on one connection, written once per loop turn together. */
export function createTurnBatch(client: Redis): {
  nonceSet: NonceSet;
  scriptCall: (lua: string, fallback: ScriptFallback) => ScriptCall;
} {
  const writer = createTurnWriter(client);
  const keyPrefix = client.options.keyPrefix ?? '';
  // The TTL is the same for every request of one receive window: its RESP text is kept.
  let ttlMs = -1;
  let ttlArg = '';

  const nonceSet: NonceSet = (key, ttl, done) => {
    if (!writer.ready()) return done(new Error(NOT_READY), false);
    if (ttl !== ttlMs) {
      ttlMs = ttl;
      ttlArg = bulk(String(ttl));
    }
    const k = keyPrefix + key;
    writer.add(
      new PendingSet(done),
      `*6\r\n$3\r\nSET\r\n$${Buffer.byteLength(k)}\r\n${k}\r\n$1\r\n1\r\n$2\r\nPX\r\n${ttlArg}$2\r\nNX\r\n`,
    );
  };

  const scriptCall = (lua: string, fallback: ScriptFallback): ScriptCall => {
    const head = `$7\r\nEVALSHA\r\n${bulk(createHash('sha1').update(lua).digest('hex'))}`;
    return (args, done) => {
      if (!writer.ready()) return done(new Error(NOT_READY), []);
      const numKeys = Number(args[0]);
      let resp = `*${args.length + 2}\r\n${head}`;
      for (let i = 0; i < args.length; i++) {
        const a = String(args[i]);
        resp += bulk(i >= 1 && i <= numKeys ? keyPrefix + a : a);
      }
      writer.add(new PendingScript(done, args, fallback), resp);
    };
  };

  return { nonceSet, scriptCall };
}
