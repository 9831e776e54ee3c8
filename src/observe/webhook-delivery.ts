// Tested in test/e2e/webhooks.test.ts, test/e2e/webhooks-topology.test.ts (Cluster, Sentinel), test/process/webhooks-kill.test.ts.
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { Clock } from '../clock.js';
import { parseAttempts, WEBHOOK_GROUP, webhookKeys } from '../store/webhook-queue.js';
import type { Metrics } from './metrics.js';
import { auditEntryOfFields, webhookEvent } from '../store/webhook-events.js';
import { webhookHeaders } from './webhook-signature.js';

/** The Redis commands the delivery sends: an ioredis client (server, Sentinel or Cluster) of its own. */
export interface WebhookRedis {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
  /** Whether the connection is up (ioredis: status `ready`): nothing is read before it is. */
  ready(): boolean;
}

export interface WebhookDeliveryOptions {
  readonly url: URL;
  /** The HMAC-SHA256 key: the base64-decoded part of the `whsec_` secret. */
  readonly signingKey: Uint8Array;
  /** One attempt's deadline, in ms; a consumer's claim on an event lasts this plus CLAIM_MARGIN_MS. */
  readonly timeoutMs: number;
  /** Wait before each retry (the last one repeated), in ms. */
  readonly retryDelaysMs: readonly number[];
  /** Retries stop with the first failed attempt this long after the event's first attempt, in ms. */
  readonly retryForMs: number;
  /** This process's name in the consumer group: unique per process (host, pid and a random part). */
  readonly consumer: string;
  /** Prefix of the Redis names (default "keygate:", the store's). */
  readonly prefix?: string;
  /** How long one read waits for a new entry, in ms (default 1,000): also how often due retries are looked for. */
  readonly blockMs?: number;
}

export interface WebhookDelivery {
  /**
   * Stops reading; the attempts in flight run on for up to `deadlineMs` (a graceful stop): one that
   * ends is settled as usual; one still running then is aborted and handed back at once (due now in the
   * retry schedule), so another instance sends it without waiting for a claim to end. Then this
   * instance leaves the consumer group (nothing of it is pending any more).
   */
  close(deadlineMs?: number): Promise<void>;
}

export { WEBHOOK_GROUP };
/** A claim outlives the attempt's deadline by this much before another consumer may take the event over. */
export const CLAIM_MARGIN_MS = 5_000;
/** Events handled per read; their attempts run side by side. */
const BATCH = 16;

/**
 * The due retries: each taken is claimed until ARGV[2] (its score moved to the claim's end), so no
 * other consumer takes it meanwhile; a consumer that dies leaves it due again once the claim ends.
 * KEYS (store/webhook-queue.ts): 1 audit stream · 2 retry schedule (zset id → next attempt, ms) ·
 * 3 attempts (hash id → "n firstMs lastError") · 4 holder (hash id → consumer) · 5 retry order.
 * ARGV: 1 now · 2 claim end · 3 count · 4 consumer. Returns {id, attempts or '', the entry's fields or {} if trimmed}.
 */
const TAKE_DUE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i, id in ipairs(due) do
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  redis.call('HSET', KEYS[4], id, ARGV[4])
  local e = redis.call('XRANGE', KEYS[1], id, id)
  local fields = {}
  if e[1] then fields = e[1][2] end
  out[i] = {id, redis.call('HGET', KEYS[3], id) or '', fields}
end
return out`;

/**
 * One attempt's bookkeeping, atomically: the entry leaves the group's pending list (XACK) and either
 * waits in the retry schedule with its attempt count, or is done (delivered, given up, or no event).
 * A handed-back attempt is a 'retry' due now with its attempt count unchanged.
 * KEYS as TAKE_DUE. ARGV: 1 group · 2 id · 3 'retry' | 'done' · 4 next attempt (ms) · 5 "attempts firstMs lastError".
 */
const SETTLE = `
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
if ARGV[3] == 'retry' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[5])
  redis.call('ZADD', KEYS[5], tonumber(string.match(ARGV[2], '^(%d+)')), ARGV[2])
else
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('ZREM', KEYS[5], ARGV[2])
end
return 1`;

/**
 * Events not yet delivered, group-wide: not read yet (the group's lag), being attempted for the first
 * time, plus waiting for a retry. Where Redis cannot tell the lag, the entries after the group's last
 * read are counted.
 */
const PENDING = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1])
local lag = 0
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  if info['name'] == ARGV[1] then
    lag = tonumber(info['lag'])
    if lag == nil then lag = #redis.call('XRANGE', KEYS[1], '(' .. info['last-delivered-id'], '+') end
  end
end
return p[1] + redis.call('ZCARD', KEYS[2]) + lag`;

/** Removes a consumer from the group only while it holds nothing (one step: it cannot read in between). ARGV: 1 group · 2 consumer. */
const LEAVE = `
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then return 0 end
return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2]) and 1`;

interface Job {
  /** The audit stream entry's id: the event's `webhook-id` is derived from it. */
  readonly id: string;
  readonly fields: readonly string[] | null;
  /** Failed attempts so far and when the first was, from the attempts hash (none for a first attempt). */
  readonly attempts: number;
  readonly firstMs: number | undefined;
  /** The last failed attempt's status or cause ('' for none). */
  readonly lastError: string;
}

/** A job from the attempts hash's "attempts firstMs lastError". */
const jobOf = (id: string, fields: readonly string[] | null, state: string): Job => ({
  id,
  fields,
  ...parseAttempts(state),
});

type Outcome = { ok: true } | { ok: false; status?: number; cause?: string };

/**
 * Delivers the audit stream's entries as signed webhooks (Standard Webhooks), at least once, from any
 * number of instances (docs/management-api.md#webhooks):
 *  - every instance is a consumer of one consumer group on `{keystore}:audit`, so XREADGROUP hands each
 *    new entry to one of them;
 *  - an entry stays in the group's pending list while its first attempt runs. An instance that dies
 *    mid-attempt leaves it there: once it has been idle longer than a claim (the attempt's deadline plus
 *    CLAIM_MARGIN_MS), another instance takes it over with XAUTOCLAIM and sends it;
 *  - a failed attempt (not 2xx, a timeout, no connection) moves the entry, in one script, from the pending
 *    list to a retry schedule in Redis (next attempt time and attempt count), so the retries survive the
 *    instance. A due retry is claimed by moving its time to the claim's end, with the same rule for an
 *    instance that dies;
 *  - every name is on the `{keystore}` hash tag, so on a Cluster the scripts run on one slot.
 * Ordering is not kept: a retried event may arrive after a later one (the body's timestamp says when).
 */
export function createWebhookDelivery(
  options: WebhookDeliveryOptions,
  deps: {
    logger: Logger;
    clock: Clock;
    metrics: Pick<Metrics, 'webhookDeliveries' | 'webhookPending'>;
    redis: WebhookRedis;
  },
): WebhookDelivery {
  const { logger, clock, metrics, redis } = deps;
  const names = webhookKeys(options.prefix ?? 'keygate:');
  const stream = names.stream;
  const keys = [stream, names.retry, names.attempts, names.holder, names.retryOrder] as const;
  const claimMs = options.timeoutMs + CLAIM_MARGIN_MS;
  const blockMs = options.blockMs ?? 1_000;
  const me = options.consumer;
  const agent = new Agent({ connect: { timeout: options.timeoutMs }, keepAliveTimeout: 4_000 });
  /** No more reads (a stop began). */
  const stopping = new AbortController();
  /** The attempts in flight are cut (the stop's deadline passed). */
  const aborting = new AbortController();
  const script = (body: string, ...args: (string | number)[]) =>
    redis.call('EVAL', body, keys.length, ...keys, ...args);
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(done, ms);
      t.unref();
      stopping.signal.addEventListener('abort', done, { once: true });
      function done() {
        clearTimeout(t);
        stopping.signal.removeEventListener('abort', done);
        resolve();
      }
    });

  let groupReady = false;
  /** Create the group if it is missing; `$`: only entries written from now on become events. */
  const ensureGroup = async () => {
    if (groupReady) return;
    try {
      await redis.call('XGROUP', 'CREATE', stream, WEBHOOK_GROUP, '$', 'MKSTREAM');
      logger.info({ stream, group: WEBHOOK_GROUP }, 'webhooks: consumer group created on the audit stream');
    } catch (err) {
      if (!/BUSYGROUP/.test((err as Error).message)) throw err;
    }
    groupReady = true;
  };

  async function attempt(id: string, body: string): Promise<Outcome> {
    const headers = webhookHeaders(options.signingKey, `msg_${id}`, Math.floor(clock.nowMs() / 1000), body);
    try {
      const res = await request(options.url, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'user-agent': 'keygate-webhooks' },
        body,
        dispatcher: agent,
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs,
        signal: AbortSignal.any([aborting.signal, AbortSignal.timeout(options.timeoutMs)]),
      });
      // The answer's body is not read: only its status counts (a redirect is a failure, never followed).
      await res.body.dump({ limit: 65_536 }).catch(() => {});
      return res.statusCode >= 200 && res.statusCode < 300 ? { ok: true } : { ok: false, status: res.statusCode };
    } catch (err) {
      const e = err as { code?: string; name?: string };
      return { ok: false, cause: e.code ?? e.name ?? 'error' };
    }
  }

  /** Back to the retry schedule, due now, its attempts unchanged: any instance sends it next. */
  const handBack = (job: Job) =>
    script(
      SETTLE,
      WEBHOOK_GROUP,
      job.id,
      'retry',
      clock.nowMs(),
      `${job.attempts} ${job.firstMs ?? ''} ${job.lastError}`,
    );

  async function handle(job: Job): Promise<void> {
    const entry = job.fields && job.fields.length > 0 ? auditEntryOfFields(job.fields) : undefined;
    if (job.fields === null || job.fields.length === 0) {
      // Removed from the stream before it could be sent (the stream's hard cap): nothing left to send.
      metrics.webhookDeliveries.inc({ outcome: 'given_up' });
      logger.error({ webhookId: `msg_${job.id}` }, 'webhook given up: its audit entry was trimmed from the stream');
      await script(SETTLE, WEBHOOK_GROUP, job.id, 'done', 0, '');
      return;
    }
    const event = entry && webhookEvent(entry);
    if (!event) {
      await script(SETTLE, WEBHOOK_GROUP, job.id, 'done', 0, '');
      return;
    }
    const outcome = await attempt(job.id, JSON.stringify(event));
    if (aborting.signal.aborted && !outcome.ok) {
      await handBack(job);
      logger.info({ webhookId: `msg_${job.id}`, instance: me }, 'webhook attempt cut by the stop; handed back');
      return;
    }
    const log = { webhookId: `msg_${job.id}`, type: event.type, attempt: job.attempts + 1, instance: me };
    if (outcome.ok) {
      await script(SETTLE, WEBHOOK_GROUP, job.id, 'done', 0, '');
      metrics.webhookDeliveries.inc({ outcome: 'delivered' });
      logger.info(log, 'webhook delivered');
      return;
    }
    const now = clock.nowMs();
    const firstMs = job.firstMs ?? now;
    const attempts = job.attempts + 1;
    const why = { ...log, ...(outcome.status !== undefined && { status: outcome.status }), cause: outcome.cause };
    if (now - firstMs >= options.retryForMs) {
      await script(SETTLE, WEBHOOK_GROUP, job.id, 'done', 0, '');
      metrics.webhookDeliveries.inc({ outcome: 'given_up' });
      logger.error(why, `webhook given up after ${attempts} attempts over ${Math.round((now - firstMs) / 60_000)} min`);
      return;
    }
    const delays = options.retryDelaysMs;
    const nextMs = now + (delays[Math.min(attempts - 1, delays.length - 1)] ?? 60_000);
    const lastError = String(outcome.status ?? outcome.cause ?? 'error').replace(/\s+/g, '_');
    await script(SETTLE, WEBHOOK_GROUP, job.id, 'retry', nextMs, `${attempts} ${firstMs} ${lastError}`);
    metrics.webhookDeliveries.inc({ outcome: 'failed' });
    logger.warn({ ...why, nextAttempt: new Date(nextMs).toISOString() }, 'webhook attempt failed; retrying');
  }

  /** What this consumer should attempt now: entries a stopped consumer left, due retries, then new entries. */
  async function take(): Promise<Job[]> {
    const jobs: Job[] = [];
    const now = clock.nowMs();
    // Entries another consumer read and left longer than a claim: taken over, and who held them logged.
    const idle = (await redis.call('XPENDING', stream, WEBHOOK_GROUP, 'IDLE', claimMs, '-', '+', BATCH)) as Array<
      [string, string, number, number]
    >;
    if (idle.length > 0) {
      const [, claimed, deleted] = (await redis.call(
        'XAUTOCLAIM',
        stream,
        WEBHOOK_GROUP,
        me,
        claimMs,
        '0-0',
        'COUNT',
        BATCH,
      )) as [string, Array<[string, string[]] | null>, string[] | undefined];
      const from = new Map(idle.map(([id, consumer]) => [id, consumer]));
      for (const e of claimed) {
        if (!e) continue;
        jobs.push({ id: e[0], fields: e[1], attempts: 0, firstMs: undefined, lastError: '' });
        logger.info({ webhookId: `msg_${e[0]}`, instance: me, from: from.get(e[0]) }, 'webhook taken over');
      }
      for (const id of deleted ?? []) jobs.push({ id, fields: null, attempts: 0, firstMs: undefined, lastError: '' });
    }
    const due = (await script(TAKE_DUE, now, now + claimMs, BATCH, me)) as Array<[string, string, string[]]>;
    for (const [id, state, fields] of due) jobs.push(jobOf(id, fields, state));
    // Wait for new entries only when there is nothing else to do.
    const read = (await redis.call(
      'XREADGROUP',
      'GROUP',
      WEBHOOK_GROUP,
      me,
      'COUNT',
      BATCH,
      ...(jobs.length === 0 ? ['BLOCK', blockMs] : []),
      'STREAMS',
      stream,
      '>',
    )) as Array<[string, Array<[string, string[]]>]> | null;
    for (const [id, fields] of read?.[0]?.[1] ?? [])
      jobs.push({ id, fields, attempts: 0, firstMs: undefined, lastError: '' });
    return jobs;
  }

  /**
   * Consumers that left (a stop, a crash, a scale-down) are removed once nothing is pending for them
   * (a crashed one's events taken over) and they have been idle longer than a claim. A live consumer
   * removed meanwhile is made again by its next read; LEAVE never removes one holding an event.
   */
  async function prune(): Promise<void> {
    const consumers = (await redis.call('XINFO', 'CONSUMERS', stream, WEBHOOK_GROUP)) as unknown[][];
    for (const c of consumers) {
      const info = new Map<string, unknown>();
      for (let i = 0; i + 1 < c.length; i += 2) info.set(String(c[i]), c[i + 1]);
      const name = String(info.get('name'));
      if (name !== me && Number(info.get('pending')) === 0 && Number(info.get('idle')) > claimMs)
        if (Number(await script(LEAVE, WEBHOOK_GROUP, name)) === 1)
          logger.info({ consumer: name, instance: me }, 'webhooks: a stopped instance left the consumer group');
    }
  }

  /** Events a writer had to trim unread (the stream past its hard cap): counted and logged, once. */
  async function reportLost(): Promise<void> {
    const lost = Number(await redis.call('GETDEL', names.lost));
    if (!(lost > 0)) return;
    metrics.webhookDeliveries.inc({ outcome: 'given_up' }, lost);
    logger.error(
      { events: lost, instance: me },
      'webhooks given up: events trimmed from the audit stream before they were delivered (it outgrew its hard cap)',
    );
  }

  /** An error in words an operator can act on; a Redis reply (NOGROUP, OOM) is Redis's own words. */
  const words = (err: Error) =>
    err.name === 'ReplyError' ? err.message : /timed? ?out/i.test(err.message) ? 'no answer in time' : 'not connected';

  let lastError = 0;
  let lastPrune = clock.nowMs();
  const loop = (async () => {
    while (!stopping.signal.aborted) {
      try {
        // Before the connection is up (a start, an outage) there is nothing to read: wait, quietly
        // (the store's connections log the outage).
        if (!redis.ready()) {
          await pause(50);
          continue;
        }
        await ensureGroup();
        const jobs = await take();
        if (stopping.signal.aborted) {
          // Read as the stop began: handed back at once, never left for a claim to end.
          await Promise.all(jobs.map(handBack));
          break;
        }
        const count = () =>
          script(PENDING, WEBHOOK_GROUP).then(
            (n) => metrics.webhookPending.set(Number(n)),
            () => {},
          );
        let settled = false;
        const batch = Promise.allSettled(
          jobs.map((job) =>
            handle(job).catch((err: Error) =>
              // The bookkeeping failed (Redis went away): the entry stays pending or scheduled, sent again later.
              logger.warn({ webhookId: `msg_${job.id}`, err: words(err) }, 'webhook bookkeeping failed'),
            ),
          ),
        ).then(() => (settled = true));
        // Counted while the attempts run too: a batch a slow receiver holds must not freeze the count.
        while (!settled) {
          await count();
          await Promise.race([batch, stopping.signal.aborted ? batch : pause(blockMs)]);
        }
        metrics.webhookPending.set(Number(await script(PENDING, WEBHOOK_GROUP)));
        await reportLost();
        if (clock.nowMs() - lastPrune > claimMs) {
          lastPrune = clock.nowMs();
          await prune();
        }
      } catch (err) {
        if (stopping.signal.aborted) break;
        const message = (err as Error).message;
        // The stream was deleted (FLUSHALL, a new keystore): its group went with it.
        if (/NOGROUP/.test(message)) groupReady = false;
        // Redis down is logged by the store's connections already: once a minute here, and only
        // while this connection is up (a reply Redis gave, a command that ran out of time).
        if (redis.ready() && clock.nowMs() - lastError > 60_000) {
          lastError = clock.nowMs();
          logger.warn({ err: words(err as Error) }, 'webhooks: cannot read the audit stream; retrying');
        }
        await pause(1_000);
      }
    }
  })();

  return {
    async close(deadlineMs = 0) {
      stopping.abort();
      const cut = setTimeout(() => aborting.abort(), deadlineMs);
      await loop;
      clearTimeout(cut);
      aborting.abort();
      // Nothing of this instance is pending now: it leaves the group instead of staying listed.
      if (redis.ready()) await script(LEAVE, WEBHOOK_GROUP, me).catch(() => {});
      await agent.close().catch(() => {});
    },
  };
}
