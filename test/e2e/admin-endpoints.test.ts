import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { startKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream } from '../helpers/recording-upstream.js';
import { exchange } from '../helpers/raw-socket.js';
import { serveKeygate } from '../helpers/spawn-keygate.js';

/** /healthz, /readyz and friends on the admin port (Redis down: test/redis-faults; shutting down: test/lifecycle). */
describe('admin endpoints', () => {
  const cases = [
    { name: 'store answers and holds keys', keys: [makeKey({ apiKey: 'k' })], status: 200, body: { status: 'ready' } },
    // An empty store is a valid state (every token gets 10013): ready by default (issue 41).
    { name: 'store holds no keys', keys: [], status: 200, body: { status: 'ready' } },
    {
      name: 'store holds no keys, KEYGATE_READY_REQUIRES_KEYS=true',
      keys: [],
      env: { KEYGATE_READY_REQUIRES_KEYS: 'true' },
      status: 503,
      body: { status: 'not ready', reason: 'no_keys' },
    },
    {
      name: 'only revoked keys (still loaded: they answer 10013)',
      keys: [makeKey({ apiKey: 'r', state: 'revoked' })],
      status: 200,
      body: { status: 'ready' },
    },
  ];
  it.each(cases)('/readyz when $name: $status', async ({ keys, env, status, body }) => {
    const upstream = await startRecordingUpstream();
    const gate = await startKeygate({ upstream: upstream.url, keys, ...(env && { env }) });
    try {
      const res = await fetch(`${gate.adminUrl}/readyz`);
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.json()).toEqual(body);
      // Liveness does not depend on readiness.
      expect((await fetch(`${gate.adminUrl}/healthz`)).status).toBe(200);
      // The admin paths are not served on the proxy port.
      expect((await fetch(`${gate.url}/metrics`)).status).toBe(404);
    } finally {
      await gate.close();
      await upstream.close();
    }
  });

  it('answers 404 for unknown admin paths and 405 for writes', async () => {
    const upstream = await startRecordingUpstream();
    const gate = await startKeygate({ upstream: upstream.url, keys: [makeKey({ apiKey: 'k' })] });
    try {
      expect((await fetch(`${gate.adminUrl}/nope`)).status).toBe(404);
      expect((await fetch(`${gate.adminUrl}/metrics`, { method: 'POST' })).status).toBe(405);
      expect((await fetch(`${gate.adminUrl}/healthz?x=1`)).status).toBe(200);
    } finally {
      await gate.close();
      await upstream.close();
    }
  });

  it('binds to loopback unless KEYGATE_ADMIN_HOST says otherwise (config and a running keygate serve)', async () => {
    expect(loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' }).adminHost).toBe('127.0.0.1');
    expect(loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', KEYGATE_ADMIN_HOST: '0.0.0.0' }).adminHost).toBe(
      '0.0.0.0',
    );
    // The real CLI with no KEYGATE_ADMIN_HOST: /proc/net/tcp shows what the admin socket is bound to.
    const child = await serveKeygate({ KEYGATE_UPSTREAM: 'http://127.0.0.1:9', KEYGATE_ADMIN_HOST: undefined });
    const { adminPort } = child;
    try {
      const hexPort = adminPort.toString(16).toUpperCase().padStart(4, '0');
      const listening = [
        ...readFileSync('/proc/net/tcp', 'utf8').split('\n'),
        ...readFileSync('/proc/net/tcp6', 'utf8').split('\n'),
      ]
        .map((l) => l.trim().split(/\s+/))
        .filter((f) => f[1]?.endsWith(`:${hexPort}`) && f[3] === '0A')
        .map((f) => f[1]!.split(':')[0]);
      expect(listening).toEqual(['0100007F']); // 127.0.0.1, and nothing on 0.0.0.0 or ::
    } finally {
      await child.stop();
    }
  });

  it('cuts a slow client on the admin port after KEYGATE_HEADERS_TIMEOUT_MS, like the proxy port', async () => {
    const upstream = await startRecordingUpstream();
    const gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'k' })],
      env: { KEYGATE_HEADERS_TIMEOUT_MS: '600', KEYGATE_REQUEST_TIMEOUT_MS: '1000' },
    });
    try {
      const head = `GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(40)}`;
      const r = await exchange(
        Number(new URL(gate.adminUrl).port),
        [...head].flatMap((ch) => [ch, 50]),
        { quietMs: 8_000, maxMs: 10_000 },
      );
      expect(r.closed).toBe(true);
      expect(r.statuses).toEqual([408]);
      expect(r.ms).toBeGreaterThanOrEqual(550);
      expect(r.ms).toBeLessThan(3_000); // Node's default would wait 300 s for headers... and check only every 30 s
    } finally {
      await gate.close();
      await upstream.close();
    }
  });
});
