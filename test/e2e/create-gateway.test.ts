import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createGateway } from '../../src/gateway/create-gateway.js';
import { createForwarder, type Forwarder } from '../../src/gateway/upstream/forwarder.js';
import { createMetrics } from '../../src/observe/metrics.js';
import { createAuthenticator, type Authenticator } from '../../src/pipeline/authenticate.js';
import { createKeyCache } from '../../src/store/key-cache.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { KEYS, POLICY, SECRET } from '../helpers/adversarial.js';
import { parseExposition, valueOf } from '../helpers/exposition.js';
import { token } from '../helpers/tokens.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

/**
 * The gateway's error boundary: a step that throws (synchronously or in a
 * rejected promise), or a forwarder that throws, becomes 500 50000
 * internal_error with its stack in the log and its count in the metrics; the
 * process keeps serving the next request.
 */
describe('create-gateway: one error boundary, one outcome', () => {
  let upstream: RecordingUpstream;
  let url: number;
  let logs: string[];
  const metrics = createMetrics({ defaultMetrics: false });
  const boom = { mode: 'none' as 'none' | 'sync' | 'async' | 'forward' };
  let forwarder: Forwarder;
  let close: () => Promise<void>;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const config = loadConfig({
      KEYGATE_UPSTREAM: upstream.url,
      KEYGATE_CONFIG: POLICY,
      KEYGATE_PORT: '0',
      KEYGATE_ADMIN_PORT: '0',
    });
    logs = [];
    const logger = pino({ level: 'info' }, new Writable({ write: (c, _e, cb) => (logs.push(String(c)), cb()) }));
    const clock = systemClock();
    const store = createMemoryStore({ keys: KEYS }, { clock });
    const keys = createKeyCache({ ttlMs: 5_000, negativeTtlMs: 1_000, maxEntries: 100 }, { store, clock });
    const real = createAuthenticator(
      { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60, defaultRateLimit: undefined },
      { keys, store, clock },
    );
    const authenticate: Authenticator = (raw) => {
      if (boom.mode === 'sync') throw new TypeError('step exploded synchronously');
      if (boom.mode === 'async') return Promise.reject(new RangeError('step exploded in a promise'));
      return real(raw);
    };
    const inner = createForwarder(
      {
        upstream: config.upstream!,
        timeoutMs: 2_000,
        maxSockets: 8,
        queueTimeoutMs: 1_000,
        minBodyBytesPerSecond: 0,
        bodyRateGraceMs: 1_000,
      },
      { logger, clock },
    );
    forwarder = {
      forward(request, bytes) {
        if (boom.mode === 'forward') throw new Error('forwarder exploded');
        inner.forward(request, bytes);
      },
      close: () => inner.close(),
    };
    const server = createGateway(config, {
      logger,
      clock,
      metrics,
      authenticate,
      forwarder,
      policy: () => config.policy,
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = (server.address() as AddressInfo).port;
    close = async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await forwarder.close();
      keys.close();
      await store.close();
      await upstream.close();
    };
  });
  afterAll(() => close());
  beforeEach(() => {
    boom.mode = 'none';
    upstream.reset();
  });

  const get = () =>
    `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nConnection: close\r\n\r\n`;
  const count = async (code: string) =>
    valueOf(parseExposition(await metrics.registry.metrics()), 'keygate_requests_total', { code }) ?? 0;

  it.each(['sync', 'async', 'forward'] as const)(
    'a %s throw → 500 50000, logged with its stack, counted; the next request is served',
    async (mode) => {
      const before = await count('50000');
      boom.mode = mode;
      const r = await exchange(url, get(), { quietMs: 2_000 });
      expect(r.statuses).toEqual([500]);
      expect(firstBody(r.text)).toEqual({ code: 50000, message: 'Internal error' });
      expect(upstream.received).toHaveLength(0);
      expect(await count('50000')).toBe(before + 1);
      const reasons = valueOf(parseExposition(await metrics.registry.metrics()), 'keygate_auth_rejections_total', {
        code: '50000',
        reason: 'internal_error',
      });
      expect(reasons).toBeGreaterThanOrEqual(1);
      const lines = logs.map(
        (l) =>
          JSON.parse(l) as { msg: string; err?: { stack?: string }; code?: number; reason?: string; status?: number },
      );
      const error = [...lines].reverse().find((l) => l.msg === 'internal error while handling a request');
      expect(error?.err?.stack).toContain('exploded');
      expect([...lines].reverse().find((l) => l.msg === 'request')).toMatchObject({
        code: 50000,
        reason: 'internal_error',
        status: 500,
      });

      boom.mode = 'none';
      const next = await exchange(url, get(), { quietMs: 2_000 });
      expect(next.statuses).toEqual([200]);
      expect(upstream.received).toHaveLength(1);
      expect(upstream.received[0]!.headers['x-api-key-id']).toBe('key-good');
    },
  );

  it('records one log line and one count per request, when the response closes', async () => {
    const before = await count('ok');
    const linesBefore = logs.length;
    const r = await exchange(url, get(), { quietMs: 2_000 });
    expect(r.statuses).toEqual([200]);
    await new Promise((res) => setTimeout(res, 20));
    expect(await count('ok')).toBe(before + 1);
    const requestLines = logs.slice(linesBefore).filter((l) => l.includes('"msg":"request"'));
    expect(requestLines).toHaveLength(1);
    expect(JSON.parse(requestLines[0]!)).toMatchObject({ code: 'ok', status: 200, keyId: 'key-good' });
  });
});
