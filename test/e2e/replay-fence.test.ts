import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { putKeys, startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { client, startRedisSentinel, until, type TestSentinel } from '../helpers/redis-topology.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';

/**
 * Issue 28, the replay fence: a nonce admitted on a master shortly before it died may never have
 * reached the replica that takes over, so the new master would admit the same token again.
 * Real master + replica (through a relay the test holds back, so the replica really lags) + sentinel;
 * two Keygates: `fenced` with the default (KEYGATE_REPLAY_FENCE=on under Sentinel) and `open` with
 * KEYGATE_REPLAY_FENCE=off, which behaves as Keygate did before the fence: it shows the count the
 * fence brings to zero. Every replay goes to `fenced` first: a fenced refusal writes no nonce, so
 * `open` then still sees what the new master lost.
 */
const SECRET = 'fence-secret-0123456789abcdef';
const PASSWORD = 'fence-pass-0123';
// The widest window the default policy allows: every token below is replayed well inside it.
const WINDOW = { recv_window: '60' };

interface Admitted {
  token: string;
  at: number;
  via: number;
  phase: 'replicated' | 'lagging' | 'traffic';
}

describe('replay fence: the master is killed mid-traffic while its replica lags', () => {
  let redis: TestSentinel;
  let upstream: RecordingUpstream;
  let gates: RunningKeygate[] = [];
  beforeAll(async () => {
    redis = await startRedisSentinel({ password: PASSWORD, relay: true });
    upstream = await startRecordingUpstream();
    const env = {
      KEYGATE_REDIS_SENTINELS: redis.sentinels,
      KEYGATE_REDIS_SENTINEL_NAME: redis.masterName,
      KEYGATE_REDIS_PASSWORD: PASSWORD,
      KEYGATE_LOG_LEVEL: 'warn',
    };
    gates = [
      await startKeygate({ upstream: upstream.url, env, keys: [makeKey({ apiKey: 'fenced-key', secret: SECRET })] }),
      await startKeygate({ upstream: upstream.url, env: { ...env, KEYGATE_REPLAY_FENCE: 'off' } }),
    ];
  }, guard(60_000));
  afterAll(async () => {
    for (const g of gates) await g.close();
    await upstream?.close();
    await redis?.stop();
  });

  const call = (gate: RunningKeygate, t: string) =>
    send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });
  const fencedRefusals = async (gate: RunningKeygate) => {
    const text = (await send(gate.adminUrl, '/metrics')).body;
    const m = /keygate_auth_rejections_total\{code="40106",reason="fenced"\} (\d+)/.exec(text);
    return Number(m?.[1] ?? NaN);
  };

  it(
    'a token admitted before the failover is never admitted again by the fenced instance, also when its nonce was on the old master only',
    async () => {
      const [fenced, open] = gates as [RunningKeygate, RunningKeygate];
      expect(fenced.config.replayFence).toBe(true);
      expect(open.config.replayFence).toBe(false);
      const admitted: Admitted[] = [];
      const admit = async (phase: Admitted['phase'], via: number) => {
        const t = token('fenced-key', SECRET, WINDOW);
        const at = Date.now();
        const r = await call(gates[via]!, t);
        if (r.status === 200) admitted.push({ token: t, at, via, phase });
        return r;
      };
      for (let i = 0; i < 6; i++) expect((await admit('replicated', i % 2)).status).toBe(200);
      await redis.waitReplicated();
      await redis.relay!.hold();
      for (let i = 0; i < 10; i++) expect((await admit('lagging', i % 2)).status).toBe(200);
      // The held link really carries those nonces: the replica the sentinel will promote lacks them.
      expect(await redis.relay!.held()).toBeGreaterThan(0);

      // Traffic: two clients, a fresh token per request, alternating instances, through the failover.
      let running = true;
      const statuses: Array<{ at: number; status: number; fenced: boolean }> = [];
      const loop = async (offset: number) => {
        for (let n = offset; running; n += 2) {
          const t = token('fenced-key', SECRET, WINDOW);
          const at = Date.now();
          try {
            const r = await call(gates[n % 2]!, t);
            if (r.status === 200) admitted.push({ token: t, at, via: n % 2, phase: 'traffic' });
            statuses.push({ at, status: r.status, fenced: r.status === 401 && 'x-server-time' in r.headers });
          } catch {
            statuses.push({ at, status: 0, fenced: false });
          }
          await new Promise((r) => setTimeout(r, 5));
        }
      };
      const loops = [loop(0), loop(1)];
      await new Promise((r) => setTimeout(r, 300));
      const oldMaster = await redis.currentMasterPort();
      const killedAt = Date.now();
      await redis.killMaster();
      await until(
        'the sentinel promotes the replica',
        async () => (await redis.currentMasterPort()) !== oldMaster,
        20_000,
      );
      await until(
        'both instances serve fresh tokens again',
        async () => {
          const recent = statuses.filter((s) => s.at > Date.now() - 1_000);
          return recent.length > 10 && recent.every((s) => s.status === 200);
        },
        20_000,
      );
      running = false;
      await Promise.all(loops);

      const before = admitted.filter((a) => a.at < killedAt);
      const laggingTraffic = before.filter((a) => a.phase !== 'replicated');
      expect(laggingTraffic.length).toBeGreaterThan(10);
      // Every token admitted before the kill, replayed on the fenced instance: never admitted.
      const fencedAgain: Admitted[] = [];
      for (const a of before) if ((await call(fenced, a.token)).status === 200) fencedAgain.push(a);
      // ... and on the unfenced one, what the new master lost (the nonces held back on the relay).
      const openAgain: Admitted[] = [];
      for (const a of before) if ((await call(open, a.token)).status === 200) openAgain.push(a);
      // Tokens admitted after the failover: replays caught on both instances by the replay guard.
      const after = admitted.filter((a) => a.at > killedAt).slice(-10);
      for (const a of after) for (const g of gates) expect((await call(g, a.token)).status).toBe(401);

      const during = statuses.filter((s) => s.at >= killedAt);
      const report = {
        admittedBeforeKill: before.length,
        ofWhichOnOldMasterOnly: laggingTraffic.length,
        readmittedFenceOff: openAgain.length,
        readmittedFenceOn: fencedAgain.length,
        trafficRequests: statuses.length,
        trafficPerSecond: Math.round(statuses.length / ((Date.now() - statuses[0]!.at) / 1000)),
        fencedFreshTokens: during.filter((s) => s.fenced).length,
        unavailable: during.filter((s) => s.status === 503).length,
        fencedRefusalsMetric: await fencedRefusals(fenced),
      };
      console.log(`[replay-fence] ${JSON.stringify(report)}`);
      expect(fencedAgain).toEqual([]);
      // Without the fence the lost nonces pass again: what the fence is for (before: > 0; after: 0).
      expect(openAgain.length).toBeGreaterThan(0);
      expect(openAgain.every((a) => a.phase !== 'replicated')).toBe(true);
      // Every refusal of a pre-failover token by the fenced instance was counted as fenced.
      expect(report.fencedRefusalsMetric).toBeGreaterThanOrEqual(openAgain.length);
      // During the failover the traffic saw only 200, 503, or a fenced 401 (a token signed before the switch).
      expect(during.filter((s) => s.status !== 200 && s.status !== 503 && !s.fenced)).toEqual([]);
    },
    guard(90_000),
  );
});

/**
 * The reconnect trigger (src/store/redis/connection/failover-watch.ts): a command connection that comes back raises the
 * fence at once, provisionally, and lowers it when INFO shows the run_id it had before (the same
 * server: a dropped connection lost no nonce); another run_id (a new server on that address, which
 * without persistence forgot every nonce) keeps it up.
 */
const fencedReply = (r: { status: number; headers: Record<string, unknown> }) =>
  r.status === 401 && 'x-server-time' in r.headers;

describe('replay fence: a Sentinel master that drops our connections and takes it back is the same master', () => {
  let redis: TestSentinel;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  beforeAll(async () => {
    redis = await startRedisSentinel({ password: PASSWORD });
    upstream = await startRecordingUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      env: {
        KEYGATE_REDIS_SENTINELS: redis.sentinels,
        KEYGATE_REDIS_SENTINEL_NAME: redis.masterName,
        KEYGATE_REDIS_PASSWORD: PASSWORD,
        KEYGATE_LOG_LEVEL: 'warn',
      },
      keys: [makeKey({ apiKey: 'fenced-key', secret: SECRET })],
    });
  }, guard(60_000));
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it(
    'the fence raised at the reconnect comes down once the run_id proves the same server: a token signed before it is admitted',
    async () => {
      expect(gate.config.replayFence).toBe(true);
      const call = (t: string) => send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });
      expect((await call(token('fenced-key', SECRET, WINDOW))).status).toBe(200);
      // Signed now, sent only after the reconnect: older than the moment the fence goes up.
      const signedBefore = token('fenced-key', SECRET, WINDOW);
      await new Promise((r) => setTimeout(r, 5));
      const c = client(await redis.currentMasterPort(), PASSWORD);
      await c.connect();
      // Everyone else's plain connections to the master: Keygate's and the sentinel's command link.
      const others = async () =>
        String(await c.call('CLIENT', 'LIST', 'TYPE', 'normal'))
          .split('\n')
          .filter((l) => l.startsWith('id=') && !l.includes(' cmd=client|list')).length;
      const connected = await others();
      const killed = (await c.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes')) as number;
      expect(killed).toBe(connected);
      // Every one of them back (the sentinel's link alone would be one): Keygate has reconnected.
      await until('Keygate reconnects to the master', async () => (await others()) >= connected, 10_000);
      c.disconnect();
      // Fresh tokens pass again once the command connection is back.
      await until(
        'Keygate serves again after the reconnect',
        async () => (await call(token('fenced-key', SECRET, WINDOW))).status === 200,
        10_000,
      );
      // A fenced refusal writes no nonce, so the same token may be tried until the fence is down; it
      // never comes down if the reconnect were taken for a failover.
      const answers: number[] = [];
      await until(
        'the token signed before the reconnect is admitted',
        async () => {
          const r = await call(signedBefore);
          answers.push(fencedReply(r) ? -401 : r.status);
          return r.status === 200;
        },
        5_000,
      );
      console.log(
        `[replay-fence] same master after a reconnect: answers to the token signed before it ${JSON.stringify(answers)}`,
      );
      expect(answers.filter((a) => a !== 200 && a !== -401)).toEqual([]);
      expect(gate.logs.some((l) => l.includes('replay fence raised'))).toBe(false);
      // And it is still a replay guard: the same token again is a replay.
      expect((await call(signedBefore)).status).toBe(401);
    },
    guard(60_000),
  );
});

describe('replay fence: one server restarted without persistence (a new run_id on the same address)', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gates: RunningKeygate[] = [];
  beforeAll(async () => {
    redis = await startRedis({ persistence: 'none' });
    upstream = await startRecordingUpstream();
    const env = { KEYGATE_REDIS_URL: redis.url, KEYGATE_LOG_LEVEL: 'warn' };
    gates = [
      await startKeygate({ upstream: upstream.url, env: { ...env, KEYGATE_REPLAY_FENCE: 'on' } }),
      // Off by default for one server: no fence on a new run_id (a restart with its data is no loss).
      await startKeygate({ upstream: upstream.url, env }),
    ];
    await putKeys(gates[0]!.keygate.store, [makeKey({ apiKey: 'fenced-key', secret: SECRET })]);
  }, guard(60_000));
  afterAll(async () => {
    for (const g of gates) await g.close();
    await upstream?.close();
    await redis?.stop();
  });

  it(
    'a token admitted before the restart is refused as fenced with the fence on (new run_id), and with it off (the keystore emptied)',
    async () => {
      const [fenced, open] = gates as [RunningKeygate, RunningKeygate];
      expect([fenced.config.replayFence, open.config.replayFence]).toEqual([true, false]);
      const call = (g: RunningKeygate, t: string) =>
        send(g.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });
      const admitted = [token('fenced-key', SECRET, WINDOW), token('fenced-key', SECRET, WINDOW)];
      expect((await call(fenced, admitted[0]!)).status).toBe(200);
      expect((await call(open, admitted[1]!)).status).toBe(200);
      await redis.kill();
      await redis.start();
      // The restarted server forgot the key too: put it back, as an operator restoring keys would.
      await until(
        'both instances reconnected',
        async () => {
          await fenced.keygate.store.putKey(makeKey({ apiKey: 'fenced-key', secret: SECRET }));
          const fresh = await Promise.all(gates.map((g) => call(g, token('fenced-key', SECRET, WINDOW))));
          return fresh.every((r) => r.status === 200);
        },
        15_000,
      );
      // Each admitted token on each instance; the fenced instance first (a fenced refusal writes no nonce).
      const fencedAnswers = await Promise.all(admitted.map((t) => call(fenced, t)));
      const openAnswers: number[] = [];
      for (const t of admitted) openAnswers.push((await call(open, t)).status);
      console.log(
        `[replay-fence] one server restarted: tokens admitted before, tried again: fence on ${JSON.stringify(fencedAnswers.map((r) => r.status))}, fence off ${JSON.stringify(openAnswers)}`,
      );
      expect(fencedAnswers.every(fencedReply)).toBe(true);
      // Before issue 46 the instance with the fence off admitted both again (the restarted server lost the
      // nonces). The keystore's epoch marker went with them: an emptied keystore raises the fence either way.
      expect(openAnswers).toEqual([401, 401]);
      expect(fenced.logs.some((l) => l.includes('replay fence raised') && l.includes('new_master'))).toBe(true);
      expect(open.logs.some((l) => l.includes('new_master'))).toBe(false);
      expect(open.logs.filter((l) => l.includes('redis keystore emptied'))).toHaveLength(1);
    },
    guard(60_000),
  );
});
