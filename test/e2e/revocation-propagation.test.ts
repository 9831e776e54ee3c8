import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKey, startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';
import { startUpstream, type RecordingUpstream } from '../helpers/upstream.js';

const run = promisify(execFile);
const SECRET = 'plain-secret-0123456789abcdef';
const PATH = '/api/v3/viewer/accounts';

describe('key changes reach every running instance', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;

  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    await redis.flush();
    upstream = await startUpstream();
    // A long cache TTL proves that eviction comes from the published change, not from expiry.
    const env = { KEYGATE_KEY_CACHE_TTL_MS: '600000' };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, keys: [makeKey({ apiKey: 'good', secret: SECRET }), makeKey({ apiKey: 'other', secret: SECRET })], env });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const status = async (gate: RunningKeygate, apiKey: string) => (await send(gate.url, PATH, { headers: bearer(token(apiKey, SECRET)) })).status;

  it('a key revoked with the CLI is refused by both instances within 1 second', async () => {
    expect(await status(a, 'good')).toBe(200);
    expect(await status(b, 'good')).toBe(200);
    const started = Date.now();
    await run('node', ['bin/keygate.js', 'keys', 'revoke', 'good', '--reason', 'test'], { env: { ...process.env, KEYGATE_REDIS_URL: redis.url } });
    const cliDone = Date.now();
    await expect.poll(() => status(a, 'good'), { timeout: 1_000, interval: 20 }).toBe(404);
    await expect.poll(() => status(b, 'good'), { timeout: 1_000, interval: 20 }).toBe(404);
    const propagatedMs = Date.now() - cliDone;
    expect(propagatedMs).toBeLessThan(1_000);
    expect(Date.now() - started).toBeLessThan(5_000);
    // Other keys keep working.
    expect(await status(b, 'other')).toBe(200);
  });

  it('a deleted key is refused by both instances', async () => {
    expect(await status(a, 'other')).toBe(200);
    await run('node', ['bin/keygate.js', 'keys', 'delete', 'other'], { env: { ...process.env, KEYGATE_REDIS_URL: redis.url } });
    await expect.poll(() => status(a, 'other'), { timeout: 1_000, interval: 20 }).toBe(404);
    await expect.poll(() => status(b, 'other'), { timeout: 1_000, interval: 20 }).toBe(404);
  });
});
