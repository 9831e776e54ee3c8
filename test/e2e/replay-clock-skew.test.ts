import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { nowNonce, token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';

const SECRET = 'skew-secret-0123456789abcdef0123';
const SKEW_MS = 4_000;
/** How far inside A's window the nonce is when A sees it (room for a slow request on a loaded machine). */
// Room for a slow request on a loaded machine; below 2 × window (else the nonce is ahead of A's window).
const INSIDE_MS = 2_500;
const insideMs = (w: number) => Math.min(2_000 * w - 100, INSIDE_MS);

/**
 * Issue 28: two instances on one Redis whose clocks differ by 4 s. The nonce entry's lifetime used
 * to be computed on the admitting instance's clock (nonce + window − now + 1 s): a token admitted
 * on A at the old edge of its window expired from Redis ~2 s later while B, 4 s behind, still took
 * it as fresh. Now the entry lives 2 × window + 5 s whatever the clocks say.
 */
describe('replay guard across instances whose clocks differ by 4 s', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const behind: Clock = {
      nowMs: () => Date.now() - SKEW_MS,
      nowNs: () => BigInt(Date.now() - SKEW_MS) * 1_000_000n,
    };
    const keys = [makeKey({ apiKey: 'skewed', secret: SECRET })];
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, keys, env: { KEYGATE_LOG_LEVEL: 'warn' } });
    b = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      clock: behind,
      env: { KEYGATE_LOG_LEVEL: 'warn' },
    });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it(
    'admits one token exactly once, for every recv_window from 1 to the cap',
    async () => {
      const cap = a.config.policy.maxRecvWindowSeconds;
      const windows = Array.from({ length: cap }, (_, i) => i + 1);
      const before = upstream.received.length;
      // Each token is at the old edge of A's window: A admits it; B, 4 s behind, takes it as fresh
      // until A's clock reaches nonce + window + 4 s, i.e. INSIDE_MS + 4 s from now.
      // One at a time, minted just before it is sent, so it reaches A inside A's window on a loaded machine.
      const tokens: string[] = [];
      for (const w of windows) {
        const t = token('skewed', SECRET, { nonce: nowNonce(-w * 1_000 + insideMs(w)), recv_window: String(w) });
        const r = await send(a.url, ACCOUNTS_PATH, { headers: bearer(t) });
        expect(r.status, `recv_window ${w} on A: ${r.body}`).toBe(200);
        tokens.push(t);
      }
      const passed = windows.map(() => 1);
      const deadline = Date.now() + INSIDE_MS + SKEW_MS + 500;
      let rounds = 0;
      while (Date.now() < deadline) {
        const again = await Promise.all(
          tokens.flatMap((t) =>
            [b, a].map((g) => send(g.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 })),
          ),
        );
        again.forEach((r, i) => {
          if (r.status === 200) passed[Math.floor(i / 2)]!++;
          else expect([r.status, (r.json() as { code: number }).code]).toEqual([401, 40106]);
        });
        rounds++;
        await new Promise((r) => setTimeout(r, 250));
      }
      console.log(
        `[replay-skew] ${windows.length} windows, ${rounds} rounds of retries on both instances over ${INSIDE_MS + SKEW_MS + 500} ms`,
      );
      expect(rounds).toBeGreaterThan(3);
      expect(passed).toEqual(windows.map(() => 1));
      expect(upstream.received.length - before).toBe(windows.length);
    },
    guard(60_000),
  );
});
