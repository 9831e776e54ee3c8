import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { ACCOUNTS_PATH, DEMO_KEY, DEMO_SECRET } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { waitStoreReady } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { serveKeygate, type ServedKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import pino from 'pino';

const VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
const SECRET = 'lifecycle-secret-0123456789abcdef';

/** One request over `agent` (a keep-alive one would hold the connection open if shutdown did not close it), and when it ended. */
const call = (port: number, agent: Agent, tok: string) =>
  send(`http://127.0.0.1:${port}`, ACCOUNTS_PATH, { agent, headers: bearer(tok) }).then((r) => ({
    ...r,
    at: Date.now(),
  }));

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED'));
  });

const readyz = async (s: ServedKeygate) => (await fetch(`http://127.0.0.1:${s.adminPort}/readyz`)).status;

const quitCalls = async (redis: Redis) =>
  Number(/cmdstat_quit:calls=(\d+)/.exec(await redis.info('commandstats'))?.[1] ?? 0);

describe('keygate serve: startup line and graceful shutdown (real CLI process)', () => {
  let redis: TestRedis;
  let inspect: Redis;
  let upstream: RecordingUpstream;
  beforeAll(async () => {
    redis = await startRedis(); // our own server: QUIT calls are counted on it
    inspect = new Redis(redis.url);
    const store = createRedisStore({ url: redis.url }, { logger: pino({ level: 'silent' }) });
    await waitStoreReady(store);
    await store.putKey(makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good' }));
    await store.close();
    upstream = await startRecordingUpstream();
  });
  afterAll(async () => {
    inspect?.disconnect();
    await upstream?.close();
    await redis?.stop();
  });

  it('logs one startup line with the version and the effective config, the Redis password masked', async () => {
    const url = `redis://default:hunter2-not-for-logs@127.0.0.1:${redis.port}`;
    const s = await serveKeygate({
      KEYGATE_UPSTREAM: upstream.url,
      KEYGATE_REDIS_URL: url,
      KEYGATE_SHUTDOWN_TIMEOUT_MS: '2500',
    });
    try {
      // (The password is ignored by this test server: ioredis warns and carries on.)
      await expect.poll(() => readyz(s), { timeout: 10_000, interval: 50 }).toBe(200);
      await s.line('keygate started'); // written up to 100 ms after the ports answer (batched log)
      const started = s.lines().filter((l) => l.msg === 'keygate started');
      expect(started).toHaveLength(1);
      expect(started[0]).toMatchObject({
        version: VERSION,
        config: {
          port: s.port,
          adminPort: s.adminPort,
          upstream: upstream.url,
          store: 'redis',
          redis: `redis://default:***@127.0.0.1:${redis.port}`,
          limits: expect.objectContaining({ shutdownTimeoutMs: 2500 }),
        },
      });
    } finally {
      s.child.kill('SIGTERM');
      expect((await s.exited).code).toBe(0);
    }
    expect(s.output()).not.toContain('hunter2-not-for-logs');
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s: refuses new connections, reports not ready, finishes the in-flight request, closes Redis and exits 0',
    async (signal) => {
      upstream.handler = (_req, res) => setTimeout(() => res.end('{"slow":"done"}'), 1_500);
      const s = await serveKeygate({
        KEYGATE_UPSTREAM: upstream.url,
        KEYGATE_REDIS_URL: redis.url,
        KEYGATE_SHUTDOWN_TIMEOUT_MS: '10000',
        KEYGATE_KEEP_ALIVE_TIMEOUT_MS: '60000',
      });
      const agent = new Agent({ keepAlive: true });
      try {
        await expect.poll(() => readyz(s), { timeout: 10_000, interval: 50 }).toBe(200); // Redis connects after "started"

        const quitBefore = await quitCalls(inspect);
        const seen = upstream.received.length;
        const inFlight = call(s.port, agent, token('good', SECRET));
        await expect.poll(() => upstream.received.length, { timeout: 5_000, interval: 10 }).toBe(seen + 1);

        const signalled = Date.now();
        s.child.kill(signal);
        await expect.poll(() => refused(s.port), { timeout: 3_000, interval: 20 }).toBe(true);
        const ready = await fetch(`http://127.0.0.1:${s.adminPort}/readyz`);
        expect(ready.status).toBe(503);
        expect(await ready.json()).toEqual({ status: 'not ready', reason: 'shutting_down' });

        const res = await inFlight;
        expect(res).toMatchObject({ status: 200, body: '{"slow":"done"}' });
        const { code, at } = await s.exited;
        expect(code).toBe(0);
        expect(at).toBeGreaterThanOrEqual(res.at - 50);
        // The keep-alive connection (60 s idle timeout) did not hold the process: well under the 10 s deadline.
        expect(at - signalled).toBeLessThan(8_000);
        expect(await quitCalls(inspect)).toBe(quitBefore + 3); // command, subscriber and management connections
        expect(s.lines().find((l) => l.msg?.toString().startsWith('shutting down'))).toMatchObject({
          signal,
          deadlineMs: 10_000,
        });
        expect(s.lines().some((l) => l.msg === 'keygate stopped')).toBe(true);
        expect(s.lines().some((l) => String(l.msg).includes('deadline reached'))).toBe(false);
      } finally {
        agent.destroy();
        upstream.handler = undefined;
        if (s.child.exitCode === null) s.child.kill('SIGKILL');
      }
    },
  );

  it('cuts requests still in flight at KEYGATE_SHUTDOWN_TIMEOUT_MS and still exits 0 (embedded store)', async () => {
    upstream.handler = (_req, res) => setTimeout(() => res.end('too late'), 20_000);
    const s = await serveKeygate({
      KEYGATE_UPSTREAM: upstream.url,
      KEYGATE_KEYS_FILE: 'examples/demo-keys.yaml',
      KEYGATE_SHUTDOWN_TIMEOUT_MS: '500',
    });
    const agent = new Agent({ keepAlive: false });
    try {
      const seen = upstream.received.length;
      const inFlight = call(s.port, agent, token(DEMO_KEY, DEMO_SECRET)).then(
        () => 'answered',
        (e: Error) => e.message,
      );
      await expect.poll(() => upstream.received.length, { timeout: 5_000, interval: 10 }).toBe(seen + 1);
      const signalled = Date.now();
      s.child.kill('SIGTERM');
      const { code, at } = await s.exited;
      expect(code).toBe(0);
      expect(at - signalled).toBeGreaterThanOrEqual(450);
      expect(at - signalled).toBeLessThan(5_000);
      expect(await inFlight).toMatch(/socket hang up|ECONNRESET/);
      expect(s.lines().find((l) => String(l.msg).includes('deadline reached'))).toMatchObject({
        level: 40,
        deadlineMs: 500,
        connections: 1,
      });
      expect(s.output()).not.toContain(DEMO_SECRET);
    } finally {
      agent.destroy();
      upstream.handler = undefined;
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
    }
  });
});
