import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { expectNothingForwarded, SECRET, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { HS256, claims, sign, token } from '../helpers/tokens.js';
import { exchange } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const measured: Record<string, unknown> = {};

describe('adversarial: limits are set, documented and enforced', () => {
  it('every limit has a safe default (the docs/reference/configuration.md table)', () => {
    const { limits } = loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:1' });
    expect(limits).toMatchObject({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 5_000,
      maxHeaderBytes: 16_384,
      maxTokenBytes: 4_096,
      upstreamTimeoutMs: 30_000,
      redisCommandTimeoutMs: 500,
    });
  });

  it('the proxy server is built with them, and with a timeout check frequent enough to enforce them', async () => {
    const f = await startFixture();
    try {
      const server = f.gate.keygate.proxy as typeof f.gate.keygate.proxy & {
        maxHeaderSize?: number;
        connectionsCheckingInterval?: number;
      };
      expect(server.headersTimeout).toBe(10_000);
      expect(server.requestTimeout).toBe(60_000);
      expect(server.keepAliveTimeout).toBe(5_000);
      expect(server.maxHeaderSize).toBe(16_384);
    } finally {
      await f.close();
    }
  });

  it('rejects limits that would disable the guards', () => {
    for (const [name, value] of [
      ['KEYGATE_HEADERS_TIMEOUT_MS', '0'],
      ['KEYGATE_REQUEST_TIMEOUT_MS', '0'],
      ['KEYGATE_MAX_HEADER_BYTES', '0'],
      ['KEYGATE_MAX_TOKEN_BYTES', '0'],
      ['KEYGATE_UPSTREAM_TIMEOUT_MS', '0'],
      ['KEYGATE_REDIS_TIMEOUT_MS', '0'],
    ]) {
      expect(() => loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:1', [name as string]: value }), name).toThrow(name);
    }
  });
});

describe('adversarial: slow clients are cut by the configured timeouts', () => {
  const HEADERS_TIMEOUT_MS = 1_000;
  const REQUEST_TIMEOUT_MS = 2_000;
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture({
      env: {
        KEYGATE_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        KEYGATE_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
        KEYGATE_MAX_TOKEN_BYTES: '1024',
        KEYGATE_MAX_HEADER_BYTES: '4096',
        KEYGATE_KEEP_ALIVE_TIMEOUT_MS: '1000',
      },
    });
  });
  afterAll(async () => {
    console.log(`[limits] measured ms: ${JSON.stringify(measured)}`);
    await f.close();
  });
  beforeEach(() => f.upstream.reset());

  it('slowloris: 20 connections trickling header bytes are all cut soon after headersTimeout, nothing forwarded', async () => {
    const head = `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(200)}`;
    const trickle = [...head].flatMap((ch) => [ch, 100]);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => exchange(f.gate.port, trickle, { quietMs: 10_000, maxMs: 15_000 })),
    );
    const ms = results.map((r) => Math.round(r.ms)).sort((a, b) => a - b);
    measured.slowlorisCutMs = { min: ms[0], max: ms[ms.length - 1] };
    for (const r of results) {
      expect(r.closed).toBe(true);
      expect(r.statuses.every((s) => s === 408)).toBe(true);
    }
    // Cut after headersTimeout, and well before the 30 s Node would take with its default check interval.
    expect(ms[0]).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(ms[ms.length - 1]).toBeLessThan(HEADERS_TIMEOUT_MS + 2_500);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('slow body on an authenticated request is cut after requestTimeout', async () => {
    const parts: Array<string | number> = [
      `POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nContent-Length: 1000\r\n\r\n`,
    ];
    for (let i = 0; i < 60; i++) parts.push('x', 100);
    const r = await exchange(f.gate.port, parts, { quietMs: 10_000, maxMs: 15_000 });
    measured.slowBodyCutMs = Math.round(r.ms);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(r.ms).toBeLessThan(REQUEST_TIMEOUT_MS + 2_500);
    await settle(100);
    // The upstream saw the authenticated request start, but never a complete body.
    expect(f.upstream.received.every((a) => !a.complete)).toBe(true);
  });

  it('slow body without credentials is answered 401 and closed at once, not read', async () => {
    const r = await exchange(
      f.gate.port,
      [`POST /api/v3/items/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n`, 'x', 100, 'x', 100, 'x'],
      { quietMs: 3_000 },
    );
    expect(r.statuses).toEqual([401]);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeLessThan(1_000);
    expectNothingForwarded(f.upstream);
  });

  it('an idle keep-alive connection is closed after keepAliveTimeout', async () => {
    const r = await exchange(
      f.gate.port,
      `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\n\r\n`,
      { quietMs: 10_000 },
    );
    measured.keepAliveCloseMs = Math.round(r.ms);
    expect(r.statuses).toEqual([200]);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeGreaterThanOrEqual(1_000 - 50);
    expect(r.ms).toBeLessThan(1_000 + 2_500);
  });

  it('configured token and header caps are enforced (1024-byte token, 4096-byte headers)', async () => {
    const over = sign(HS256, claims('good', { pad: 'x'.repeat(1_100) }), SECRET);
    const r1 = await exchange(
      f.gate.port,
      `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${over}\r\nConnection: close\r\n\r\n`,
    );
    expect(r1.statuses).toEqual([401]);
    const r2 = await exchange(
      f.gate.port,
      `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('good', SECRET)}\r\nX-Pad: ${'p'.repeat(4_200)}\r\n\r\n`,
    );
    expect(r2.statuses).toEqual([431]);
    expect(r2.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });
});
