import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { client, startRedisSentinel, until, type TestSentinel } from '../helpers/redis-topology.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis } from '../helpers/redis-server.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';

const SECRET = 'sentinel-secret-0123456789abcdef';

interface Sample {
  at: number;
  status: number;
  code?: number;
  /** A 401 with X-Server-Time for a token signed before the instance saw the switch (replay fence). */
  fenced?: boolean;
  token: string;
}

interface FailoverReport {
  scenario: string;
  requests: number;
  ok: number;
  unavailable: number;
  /** Fresh tokens refused by the replay fence (signed just before the instance saw the switch). */
  fenced: number;
  other: number;
  /** From the trigger to the first 503, and from the first to the last 503, ms. */
  first503AfterMs: number | null;
  window503Ms: number;
  /** From the trigger until the sentinel named the new master (polled every 50 ms), ms. */
  promotedAfterMs: number;
  /** From the trigger until the first 200 after the last 503 (or after the trigger), ms. */
  recoveredAfterMs: number;
  /** Requests the upstream received during the run (must equal ok: nothing unchecked passes). */
  forwarded: number;
}

/**
 * Real master + replica + sentinel (quorum 1, down-after 1 s), Redis AUTH on,
 * two Keygate instances in Sentinel mode, steady traffic while the master
 * goes away.
 */
describe('Redis Sentinel failover during traffic', () => {
  let redis: TestSentinel;
  let upstream: RecordingUpstream;
  let gates: RunningKeygate[] = [];
  const reports: FailoverReport[] = [];
  const sentinelEnv = () => ({
    KEYGATE_REDIS_SENTINELS: redis.sentinels,
    KEYGATE_REDIS_SENTINEL_NAME: redis.masterName,
    KEYGATE_REDIS_PASSWORD: redis.password!,
  });

  beforeAll(async () => {
    redis = await startRedisSentinel({ password: 'sentinel-pass-0123' });
    upstream = await startRecordingUpstream();
    const env = { ...sentinelEnv(), KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS), KEYGATE_LOG_LEVEL: 'warn' };
    const keys = ['steady', 'revoke-after-1', 'revoke-after-2'].map((apiKey) => makeKey({ apiKey, secret: SECRET }));
    gates = [
      await startKeygate({ upstream: upstream.url, env, keys }),
      await startKeygate({ upstream: upstream.url, env }),
    ];
  }, guard(60_000));
  afterAll(async () => {
    for (const g of gates) await g.close();
    await upstream?.close();
    await redis?.stop();
    for (const r of reports) console.log(`FAILOVER ${JSON.stringify(r)}`);
  });

  const call = async (gate: RunningKeygate, t: string): Promise<{ status: number; code?: number }> => {
    const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });
    return { status: r.status, ...(r.status !== 200 && { code: (r.json() as { code: number }).code }) };
  };
  /** As `call`, noting a replay-fence refusal: 40106 with X-Server-Time (a fresh token cannot be outside its window). */
  const sample = async (gate: RunningKeygate, t: string): Promise<Omit<Sample, 'at' | 'token'>> => {
    const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });
    if (r.status === 200) return { status: 200 };
    const code = (r.json() as { code: number }).code;
    return { status: r.status, code, ...(code === 40106 && 'x-server-time' in r.headers && { fenced: true }) };
  };

  /** Four concurrent clients, each a fresh token per request, alternating instances, until stopped. */
  function traffic(): { samples: Sample[]; stop(): Promise<void> } {
    const samples: Sample[] = [];
    let running = true;
    let n = 0;
    const loop = async () => {
      while (running) {
        const gate = gates[n++ % gates.length]!;
        const t = token('steady', SECRET);
        const at = Date.now();
        try {
          samples.push({ at, token: t, ...(await sample(gate, t)) });
        } catch {
          samples.push({ at, token: t, status: 0 });
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    const loops = Array.from({ length: 4 }, loop);
    return {
      samples,
      stop: async () => {
        running = false;
        await Promise.all(loops);
      },
    };
  }

  async function failoverDuringTraffic(
    scenario: string,
    trigger: () => Promise<void>,
  ): Promise<{ report: FailoverReport; before: Sample[]; after: Sample[] }> {
    const oldMaster = await redis.currentMasterPort();
    const forwardedBefore = upstream.received.length;
    const load = traffic();
    // Enough admitted tokens to replay later, however slow the machine (a fixed pause counted them in a window).
    await until(
      'more than 10 tokens admitted before the failover',
      async () => load.samples.filter((s) => s.status === 200 && s.at < Date.now() - 100).length > 10,
      guard(30_000),
    );
    // Everything accepted before this point has reached the replica.
    await redis.waitReplicated();
    const replicatedUntil = Date.now();
    const t0 = Date.now();
    await trigger();
    await until('sentinel promotes the replica', async () => (await redis.currentMasterPort()) !== oldMaster, 20_000);
    const promotedAfterMs = Date.now() - t0;
    // Keep the load on until 20 requests in a row (more than 10 to replay after the failover) pass without a 503,
    // at least 2 s after the trigger. Counted in requests, not in a time window: a starved machine sends fewer.
    try {
      await until(
        'traffic healthy again',
        async () => {
          const recent = load.samples.slice(-20);
          return Date.now() - t0 > 2_000 && recent.length === 20 && recent.every((s) => s.status === 200 && s.at > t0);
        },
        guard(30_000),
      );
    } catch (err) {
      await load.stop();
      const recent = load.samples.filter((s) => s.at > Date.now() - 3_000);
      const tally = recent.reduce<Record<string, number>>(
        (acc, s) => ((acc[`${s.status}/${s.code ?? ''}`] = (acc[`${s.status}/${s.code ?? ''}`] ?? 0) + 1), acc),
        {},
      );
      console.log(
        `not healthy after ${scenario}: last 3 s ${JSON.stringify(tally)}; master now ${await redis.currentMasterPort()}`,
      );
      for (const g of gates)
        console.log(
          g.logs
            .filter((l) => !l.includes('"msg":"request"'))
            .slice(-15)
            .join(''),
        );
      throw err;
    }
    await load.stop();
    const samples = load.samples;
    const after503 = samples.filter((s) => s.at >= t0 && s.status === 503);
    const lastBad = Math.max(t0, ...after503.map((s) => s.at));
    const recovered = samples.find((s) => s.at > lastBad && s.status === 200);
    const report: FailoverReport = {
      scenario,
      requests: samples.length,
      ok: samples.filter((s) => s.status === 200).length,
      unavailable: samples.filter((s) => s.status === 503).length,
      fenced: samples.filter((s) => s.fenced).length,
      other: samples.filter((s) => s.status !== 200 && s.status !== 503 && !s.fenced).length,
      first503AfterMs: after503.length > 0 ? after503[0]!.at - t0 : null,
      window503Ms: after503.length > 0 ? after503[after503.length - 1]!.at - after503[0]!.at : 0,
      promotedAfterMs,
      recoveredAfterMs: (recovered?.at ?? Date.now()) - t0,
      forwarded: upstream.received.length - forwardedBefore,
    };
    reports.push(report);
    console.log(`FAILOVER ${JSON.stringify(report)}`);
    return {
      report,
      before: samples.filter((s) => s.status === 200 && s.at < replicatedUntil - 50),
      after: samples.filter((s) => s.status === 200 && s.at > (recovered?.at ?? t0)),
    };
  }

  async function checkAfterFailover(
    r: { report: FailoverReport; before: Sample[]; after: Sample[] },
    revokeKey: string,
  ) {
    // Fail closed: only 200, 503 or a replay-fence refusal (KEYGATE_REPLAY_FENCE, on by default under
    // Sentinel: a token signed before the instance saw the switch), and exactly the 200s reached the upstream.
    expect(r.report.other).toBe(0);
    // Each fence raised refuses at most the requests in flight at that moment: one per client (4).
    const raises = gates.flatMap((g) => g.logs).filter((l) => l.includes('replay fence raised')).length;
    expect(r.report.fenced).toBeLessThanOrEqual(4 * raises);
    expect(r.report.forwarded).toBe(r.report.ok);
    // Replays are still caught, for nonces written before the failover and after it, on either instance.
    expect(r.before.length).toBeGreaterThan(10);
    expect(r.after.length).toBeGreaterThan(10);
    for (const s of [...r.before.slice(-10), ...r.after.slice(0, 5)]) {
      for (const g of gates) expect(await call(g, s.token)).toEqual({ status: 401, code: 40106 });
    }
    // Revocation still propagates to both instances through the new master.
    for (const g of gates) expect((await call(g, token(revokeKey, SECRET))).status).toBe(200);
    // Propagation only: after a SIGKILL the new master has no replica left to make the revoke durable
    // (durability across failovers is test/e2e/durable-key-changes.test.ts).
    await runKeygate(['keys', 'revoke', revokeKey], {
      KEYGATE_REDIS_URL: '',
      KEYGATE_REDIS_MIN_REPLICAS: '0',
      KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true',
      ...sentinelEnv(),
    });
    const cliDone = Date.now();
    for (const [i, g] of gates.entries()) {
      try {
        await expect.poll(async () => (await call(g, token(revokeKey, SECRET))).status, PUBLISHED_WITHIN).toBe(404);
      } catch (err) {
        const store = g.keygate.store as unknown as { client: { status: string } };
        console.log(
          `instance ${i} still accepts ${revokeKey}; master ${await redis.currentMasterPort()}; client ${store.client.status}`,
        );
        console.log(
          g.logs
            .filter((l) => !l.includes('"msg":"request"'))
            .slice(-20)
            .join(''),
        );
        throw err;
      }
    }
    console.log(
      `revocation after "${r.report.scenario}" reached both instances ${Date.now() - cliDone} ms after the CLI returned`,
    );
  }

  it('serves and catches replays before any failover', async () => {
    const t = token('steady', SECRET);
    expect(await call(gates[0]!, t)).toEqual({ status: 200 });
    expect(await call(gates[1]!, t)).toEqual({ status: 401, code: 40106 });
  });

  /**
   * A sentinel names the promoted replica as soon as it is promoted and announces +switch-master only later: a
   * connection that reconnected in between is on the new master already when the message comes. A sentinel takes
   * no PUBLISH but its own, so the instance here also lists a plain Redis as a sentinel (asked for the master, it
   * answers an error and the real sentinel is asked) and the test announces the switch there.
   */
  it('a +switch-master naming the master the connections are on moves none of them; naming another, all', async () => {
    const announcer = await startRedis({ persistence: 'none' });
    const gate = await startKeygate({
      upstream: upstream.url,
      env: { ...sentinelEnv(), KEYGATE_REDIS_SENTINELS: `${redis.sentinels},127.0.0.1:${announcer.port}` },
    });
    const publisher = client(announcer.port);
    try {
      await publisher.connect();
      const lines = (from: number, msg: string) =>
        gate.logs.slice(from).filter((l) => (JSON.parse(l) as { msg: string }).msg.startsWith(msg)).length;
      const heard = 'sentinel reports a new master';
      const announce = async (toPort: number) => {
        const from = gate.logs.length;
        // Until the watcher's subscription on the announcer is in place, a message reaches nobody: sent again.
        await until('the instance heard the switch', async () => {
          await publisher.publish('+switch-master', `${redis.masterName} 127.0.0.1 1 127.0.0.1 ${toPort}`);
          await new Promise((r) => setTimeout(r, 50));
          return lines(from, heard) > 0;
        });
        return from;
      };
      expect(await call(gate, token('steady', SECRET))).toEqual({ status: 200 });

      let from = await announce(await redis.currentMasterPort());
      // Served at once on the connections it has: none was dropped.
      expect(await call(gate, token('steady', SECRET))).toEqual({ status: 200 });
      expect(lines(from, 'redis connection down')).toBe(0);

      // The control: a switch to another server moves every connection (back where the sentinel says).
      from = await announce(1);
      await until('the connections moved and came back', async () => lines(from, 'redis reconnected') >= 3);
      expect(lines(from, 'redis connection down')).toBeGreaterThan(0);
      await until('the instance serves again', async () => (await call(gate, token('steady', SECRET))).status === 200);
    } finally {
      publisher.disconnect();
      await gate.close();
      await announcer.stop();
    }
  });

  it(
    'manual failover (SENTINEL FAILOVER): old master demoted, clients follow',
    async () => {
      const r = await failoverDuringTraffic('SENTINEL FAILOVER', () => redis.forceFailover());
      await checkAfterFailover(r, 'revoke-after-1');
      expect(r.report.recoveredAfterMs).toBeLessThan(15_000);
    },
    guard(60_000),
  );

  it(
    'master killed (SIGKILL): sentinel promotes the replica, 503s stop once it has',
    async () => {
      await redis.waitHealthy();
      const r = await failoverDuringTraffic('master SIGKILL', () => redis.killMaster());
      await checkAfterFailover(r, 'revoke-after-2');
      // Down-after is 1 s; allow generous slack on a shared 2-core machine.
      expect(r.report.recoveredAfterMs).toBeLessThan(15_000);
    },
    guard(60_000),
  );
});
