// Tested in test/e2e/webhooks.test.ts, test/e2e/webhooks-topology.test.ts (Cluster, Sentinel), test/process/webhooks-kill.test.ts.
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { Clock } from '../clock.js';
import { auditStreamKey } from '../store/audit-entry.js';
import type { Metrics } from './metrics.js';
import { auditEntryOfFields, webhookEvent } from './webhook-events.js';
import { webhookHeaders } from './webhook-signature.js';

/** The Redis commands the delivery sends: an ioredis client (server, Sentinel or Cluster) of its own. */
export interface WebhookRedis {
  call(command: string, ...args: (string | number)[]): Promise<unknown>;
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
  /** Stops reading, aborts the attempts in flight (they stay pending: another instance or a restart sends them) and waits for their bookkeeping. */
  close(): Promise<void>;
}

/** The consumer group on the audit stream; one for every Keygate of the keystore. */
export const WEBHOOK_GROUP = 'webhooks';
/** A claim outlives the attempt's deadline by this much before another consumer may take the event over. */
export const CLAIM_MARGIN_MS = 5_000;
/** Events handled per read; their attempts run side by side. */
const BATCH = 16;
/** How often consumers with nothing pending and idle for an hour are removed from the group. */
const PRUNE_EVERY_MS = 300_000;
const PRUNE_IDLE_MS = 3_600_000;

/**
 * The due retries: each taken is claimed until ARGV[2] (its score moved to the claim's end), so no
 * other consumer takes it meanwhile; a consumer that dies leaves it due again once the claim ends.
 * KEYS: 1 audit stream · 2 retry schedule (zset id → next attempt, ms) · 3 attempts (hash id → "n firstMs").
 * ARGV: 1 now · 2 claim end · 3 count. Returns {id, attempts or '', the entry's fields or {} if trimmed}.
 */
const TAKE_DUE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i, id in ipairs(due) do
  redis.call('ZADD', KEYS[2], ARGV[2], id)
  local e = redis.call('XRANGE', KEYS[1], id, id)
  local fields = {}
  if e[1] then fields = e[1][2] end
  out[i] = {id, redis.call('HGET', KEYS[3], id) or '', fields}
end
return out`;

/**
 * One attempt's bookkeeping, atomically: the entry leaves the group's pending list (XACK) and either
 * waits in the retry schedule with its attempt count, or is done (delivered, given up, or no event).
 * KEYS as TAKE_DUE. ARGV: 1 group · 2 id · 3 'retry' | 'done' · 4 next attempt (ms) · 5 "attempts firstMs".
 */
const SETTLE = `
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == 'retry' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
  redis.call('HSET', KEYS[3], ARGV[2], ARGV[5])
else
  redis.call('ZREM', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
end
return 1`;

/** Events not yet delivered, group-wide: being attempted for the first time, plus waiting for a retry. */
const PENDING = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1])
return p[1] + redis.call('ZCARD', KEYS[2])`;

interface Job {
  /** The audit stream entry's id: the event's `webhook-id` is derived from it. */
  readonly id: string;
  readonly fields: readonly string[] | null;
  /** Failed attempts so far and when the first was, from the attempts hash (none for a first attempt). */
  readonly attempts: number;
  readonly firstMs: number | undefined;
}

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
  const prefix = options.prefix ?? 'keygate:';
  const stream = auditStreamKey(prefix);
  const base = `${prefix}{keystore}:`;
  const keys = [stream, `${base}webhook:retry`, `${base}webhook:attempts`] as const;
  const claimMs = options.timeoutMs + CLAIM_MARGIN_MS;
  const blockMs = options.blockMs ?? 1_000;
  const agent = new Agent({ connect: { timeout: options.timeoutMs }, keepAliveTimeout: 4_000 });
  const closing = new AbortController();
  const script = (body: string, ...args: (string | number)[]) => redis.call('EVAL', body, 3, ...keys, ...args);

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
        signal: AbortSignal.any([closing.signal, AbortSignal.timeout(options.timeoutMs)]),
      });
      // The answer's body is not read: only its status counts (a redirect is a failure, never followed).
      await res.body.dump({ limit: 65_536 }).catch(() => {});
      return res.statusCode >= 200 && res.statusCode < 300 ? { ok: true } : { ok: false, status: res.statusCode };
    } catch (err) {
      const e = err as { code?: string; name?: string };
      return { ok: false, cause: e.code ?? e.name ?? 'error' };
    }
  }

  async function handle(job: Job): Promise<void> {
    const entry = job.fields && job.fields.length > 0 ? auditEntryOfFields(job.fields) : undefined;
    if (job.fields === null || job.fields.length === 0) {
      // Trimmed from the stream (MAXLEN ~100,000) before it could be sent: nothing left to send.
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
    if (closing.signal.aborted && !outcome.ok) return; // left pending or scheduled: sent after the restart
    const log = { webhookId: `msg_${job.id}`, type: event.type, attempt: job.attempts + 1 };
    if (outcome.ok) {
      await script(SETTLE, WEBHOOK_GROUP, job.id, 'done', 0, '');
      metrics.webhookDeliveries.inc({ outcome: 'delivered' });
      logger.debug(log, 'webhook delivered');
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
    await script(SETTLE, WEBHOOK_GROUP, job.id, 'retry', nextMs, `${attempts} ${firstMs}`);
    metrics.webhookDeliveries.inc({ outcome: 'failed' });
    logger.warn({ ...why, nextAttempt: new Date(nextMs).toISOString() }, 'webhook attempt failed; retrying');
  }

  /** What this consumer should attempt now: entries a dead consumer left, due retries, then new entries. */
  async function take(): Promise<Job[]> {
    const jobs: Job[] = [];
    const now = clock.nowMs();
    const [, claimed, deleted] = (await redis.call(
      'XAUTOCLAIM',
      stream,
      WEBHOOK_GROUP,
      options.consumer,
      claimMs,
      '0-0',
      'COUNT',
      BATCH,
    )) as [string, Array<[string, string[]] | null>, string[] | undefined];
    for (const e of claimed) if (e) jobs.push({ id: e[0], fields: e[1], attempts: 0, firstMs: undefined });
    for (const id of deleted ?? []) jobs.push({ id, fields: null, attempts: 0, firstMs: undefined });
    const due = (await script(TAKE_DUE, now, now + claimMs, BATCH)) as Array<[string, string, string[]]>;
    for (const [id, state, fields] of due) {
      const [n, first] = state.split(' ');
      jobs.push({ id, fields, attempts: Number(n) || 0, firstMs: first ? Number(first) : undefined });
    }
    // Wait for new entries only when there is nothing else to do.
    const read = (await redis.call(
      'XREADGROUP',
      'GROUP',
      WEBHOOK_GROUP,
      options.consumer,
      'COUNT',
      BATCH,
      ...(jobs.length === 0 ? ['BLOCK', blockMs] : []),
      'STREAMS',
      stream,
      '>',
    )) as Array<[string, Array<[string, string[]]>]> | null;
    for (const [id, fields] of read?.[0]?.[1] ?? []) jobs.push({ id, fields, attempts: 0, firstMs: undefined });
    return jobs;
  }

  /** Consumers that left (a restart, a scale-down) with nothing pending: removed after an hour idle. */
  async function prune(): Promise<void> {
    const consumers = (await redis.call('XINFO', 'CONSUMERS', stream, WEBHOOK_GROUP)) as unknown[][];
    for (const c of consumers) {
      const info = new Map<string, unknown>();
      for (let i = 0; i + 1 < c.length; i += 2) info.set(String(c[i]), c[i + 1]);
      if (Number(info.get('pending')) === 0 && Number(info.get('idle')) > PRUNE_IDLE_MS)
        await redis.call('XGROUP', 'DELCONSUMER', stream, WEBHOOK_GROUP, String(info.get('name')));
    }
  }

  let busy: Promise<unknown> = Promise.resolve();
  let lastError = 0;
  let lastPrune = 0;
  const loop = (async () => {
    while (!closing.signal.aborted) {
      try {
        await ensureGroup();
        const jobs = await take();
        if (closing.signal.aborted) break;
        busy = Promise.allSettled(
          jobs.map((job) =>
            handle(job).catch((err: Error) =>
              // The bookkeeping failed (Redis went away): the entry stays pending or scheduled, sent again later.
              logger.warn({ webhookId: `msg_${job.id}`, err: err.message }, 'webhook bookkeeping failed'),
            ),
          ),
        );
        await busy;
        metrics.webhookPending.set(Number(await script(PENDING, WEBHOOK_GROUP)));
        if (clock.nowMs() - lastPrune > PRUNE_EVERY_MS) {
          lastPrune = clock.nowMs();
          await prune();
        }
      } catch (err) {
        if (closing.signal.aborted) break;
        const message = (err as Error).message;
        // The stream was deleted (FLUSHALL, a new keystore): its group went with it.
        if (/NOGROUP/.test(message)) groupReady = false;
        // Redis down is logged by the store's connections already: once a minute here.
        if (clock.nowMs() - lastError > 60_000) {
          lastError = clock.nowMs();
          logger.warn({ err: message }, 'webhooks: cannot read the audit stream; retrying');
        }
        await new Promise((r) => setTimeout(r, 1_000).unref());
      }
    }
  })();

  return {
    async close() {
      closing.abort();
      await busy;
      await agent.close().catch(() => {});
      void loop;
    },
  };
}
