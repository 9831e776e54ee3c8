import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';

const SECRET = 'plain-secret-0123456789abcdef';
// A long cache TTL proves that eviction comes from the published change, not from expiry.

describe('key changes reach every running instance', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;

  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    await redis.flush();
    upstream = await startRecordingUpstream();
    const env = { KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS) };
    a = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      keys: [makeKey({ apiKey: 'good', secret: SECRET }), makeKey({ apiKey: 'other', secret: SECRET })],
      env,
    });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const status = async (gate: RunningKeygate, apiKey: string) =>
    (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, SECRET)) })).status;

  it('a key revoked with the CLI is refused by both instances long before their cache expires', async () => {
    expect(await status(a, 'good')).toBe(200);
    expect(await status(b, 'good')).toBe(200);
    await runKeygate(['keys', 'revoke', 'good', '--reason', 'test'], { KEYGATE_REDIS_URL: redis.url });
    const cliDone = Date.now();
    await expect.poll(() => status(a, 'good'), PUBLISHED_WITHIN).toBe(404);
    await expect.poll(() => status(b, 'good'), PUBLISHED_WITHIN).toBe(404);
    const propagatedMs = Date.now() - cliDone;
    console.log(`[revocation] seen by both instances ${propagatedMs} ms after the CLI returned`);
    expect(propagatedMs).toBeLessThan(LONG_CACHE_TTL_MS / 10);
    // Other keys keep working.
    expect(await status(b, 'other')).toBe(200);
  });

  it('a deleted key is refused by both instances', async () => {
    expect(await status(a, 'other')).toBe(200);
    await runKeygate(['keys', 'delete', 'other'], { KEYGATE_REDIS_URL: redis.url });
    await expect.poll(() => status(a, 'other'), PUBLISHED_WITHIN).toBe(404);
    await expect.poll(() => status(b, 'other'), PUBLISHED_WITHIN).toBe(404);
  });
});
