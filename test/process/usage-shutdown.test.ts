import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { runKeygate, serveKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';

/**
 * Usage counted in process is written at graceful shutdown: SIGTERM, then `keygate keys usage`
 * at once gives every request, although the once-a-second flush had no time to run.
 */
describe('usage at shutdown', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
    await redis?.stop();
  });

  it('SIGTERM writes the pending usage before the process exits', async () => {
    // A generous Redis deadline: this test is about the flush at exit, not the deadline, and a busy machine must not
    // turn a cold process's first burst into 503 store_unavailable (a hang guard, scaled like the others).
    const env = { KEYGATE_REDIS_URL: redis.url, KEYGATE_REDIS_TIMEOUT_MS: String(guard(2_000)) };
    const created = JSON.parse(
      (await runKeygate(['keys', 'create', '--scopes', 'accounts:read', '--json'], env)).stdout,
    ) as { apiKey: string; apiSecret: string };
    const gate = await serveKeygate({ ...env, KEYGATE_UPSTREAM: upstream.url });
    // Bursts until one ends with counts still pending in the process (the once-a-second timer did not
    // write them yet), read straight from Redis; then SIGTERM must write them before the exit.
    const raw = new Redis(redis.url);
    const written = async () =>
      Object.entries(await raw.hgetall(`keygate:{${created.apiKey}}:usage`))
        .filter(([f]) => /^\d{4}-/.test(f))
        .reduce((sum, [, n]) => sum + Number(n), 0);
    let N = 0;
    let pending = 0;
    try {
      for (let attempt = 0; attempt < 5 && pending === 0; attempt++) {
        const replies = await Promise.all(
          Array.from({ length: 20 }, () =>
            send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(created.apiKey, created.apiSecret)) }),
          ),
        );
        expect(replies.map((r) => r.status)).toEqual(Array(20).fill(200));
        N += 20;
        pending = N - (await written());
      }
    } finally {
      expect((await gate.stop('SIGTERM')).code).toBe(0);
    }
    console.log(`[usage-shutdown] ${pending} of ${N} requests pending at SIGTERM`);
    expect(pending).toBeGreaterThan(0);
    expect(await written()).toBe(N);
    raw.disconnect();
    const usage = JSON.parse(
      (await runKeygate(['keys', 'usage', created.apiKey, '--days', '1', '--json'], env)).stdout,
    ) as { total: number };
    expect(usage.total).toBe(N);
  });
});
