import { describe, expect, it } from 'vitest';
import { makeKey, startKeygate } from './helpers/keygate.js';
import { startUpstream } from './helpers/upstream.js';

/** /healthz, /readyz and friends on the admin port (Redis down: test/redis-faults; shutting down: test/lifecycle). */
describe('admin endpoints', () => {
  const cases = [
    { name: 'store answers and holds keys', keys: [makeKey({ apiKey: 'k' })], status: 200, body: { status: 'ready' } },
    { name: 'store holds no keys', keys: [], status: 503, body: { status: 'not ready', reason: 'no_keys' } },
    { name: 'only revoked keys (still loaded: they answer 10013)', keys: [makeKey({ apiKey: 'r', state: 'revoked' })], status: 200, body: { status: 'ready' } },
  ];
  it.each(cases)('/readyz when $name: $status', async ({ keys, status, body }) => {
    const upstream = await startUpstream();
    const gate = await startKeygate({ upstream: upstream.url, keys });
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
    const upstream = await startUpstream();
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
});
