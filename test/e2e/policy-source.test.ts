import { appendFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTLE_MS } from '../../src/files/file-reloader.js';
import { FILE_LAYOUTS } from '../helpers/file-layouts.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

const KEY = makeKey({ apiKey: 'policy-key', scopes: ['accounts:read', 'orders:read'] });
const policy = (routes: string[], extra = '') =>
  `routes:\n${routes.map((p) => `  - { method: GET, path: ${p}, scopes: [accounts:read] }`).join('\n')}\nunlistedRoutes: deny\npublic: []\n${extra}`;

/** The policy file reloads like the keys file: every deployment layout, without a restart. */
describe.each(FILE_LAYOUTS)('policy file reload: %s', (_name, layout) => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  const file = layout('routes.yaml', policy(['/api/v3/viewer/accounts']));
  const call = (path: string, extra: Record<string, unknown> = {}) =>
    send(gate.url, path, { headers: bearer(token(KEY.apiKey, KEY.secret!, extra)) });

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, keys: [KEY], env: { KEYGATE_CONFIG: file.path } });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('applies a new route list and recv_window limit, and keeps the last good policy when the file breaks', async () => {
    expect((await call('/api/v3/orders')).status).toBe(403);
    expect((await call('/api/v3/viewer/accounts', { recv_window: '50' })).status).toBe(200);

    file.update(
      policy(['/api/v3/viewer/accounts', '/api/v3/orders'], 'maxRecvWindowSeconds: 40\ndefaultRecvWindowSeconds: 30\n'),
    );
    await expect.poll(async () => (await call('/api/v3/orders')).status, { timeout: 5_000, interval: 50 }).toBe(200);
    expect(gate.logs.some((l) => l.includes('policy file loaded') && l.includes('"cause":"file changed"'))).toBe(true);
    // The recv_window cap came from the same reload.
    expect(JSON.parse((await call('/api/v3/viewer/accounts', { recv_window: '50' })).body)).toEqual({
      code: 40106,
      message: 'Invalid Token',
    });

    file.update('routes:\n  - { method: get, path: /api/v3/x/../y }\nunlistedRoutes: maybe\n');
    await expect.poll(() => gate.logs.some((l) => l.includes('policy file rejected')), { timeout: 5_000 }).toBe(true);
    const line = gate.logs.find((l) => l.includes('policy file rejected'))!;
    expect(line).toContain('unlistedRoutes');
    expect(line).toContain('bad segment');
    const mark = upstream.received.length;
    expect((await call('/api/v3/orders')).status).toBe(200);
    expect((await call('/api/v3/other')).status).toBe(403);
    expect(upstream.received.slice(mark).map((r) => r.url)).toEqual(['/api/v3/orders']);
  });

  it('reloads on request (what SIGHUP does)', async () => {
    file.update(policy(['/api/v3/viewer/accounts']));
    // Whether or not the watcher already saw it, an explicit reload applies the file as it is now.
    expect(gate.keygate.reloadPolicy()).toBe(true);
    expect((await call('/api/v3/orders')).status).toBe(403);
    expect((await call('/api/v3/viewer/accounts')).status).toBe(200);
  });
});

/** A policy written in two halves: the half (cut before a route's scopes: a route open to every key) is never loaded. */
describe('policy file reload: a file written in two halves', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  const [, plain] = FILE_LAYOUTS[0] as (typeof FILE_LAYOUTS)[number];
  const head =
    'unlistedRoutes: deny\npublic: []\nroutes:\n  - { method: GET, path: /api/v3/viewer/accounts, scopes: [accounts:read] }\n';
  const file = plain('routes.yaml', head);
  const call = async (path: string) =>
    (await send(gate.url, path, { headers: bearer(token(KEY.apiKey, KEY.secret!)) })).status;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, keys: [KEY], env: { KEYGATE_CONFIG: file.path } });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('shows the old policy, then the new one, never the half', async () => {
    expect([await call('/api/v3/orders'), await call('/api/v3/admin')]).toEqual([403, 403]);
    const admin: number[] = [];
    writeFileSync(
      file.path,
      `${head}  - { method: GET, path: /api/v3/orders, scopes: [orders:read] }\n  - method: GET\n    path: /api/v3/admin\n`,
    );
    const until = performance.now() + SETTLE_MS / 4;
    while (performance.now() < until) admin.push(await call('/api/v3/admin'));
    appendFileSync(file.path, '    scopes: [admin:write]\n');
    // The new policy: /api/v3/orders opens (the key has orders:read); /api/v3/admin needs a scope the key lacks.
    await expect
      .poll(async () => (admin.push(await call('/api/v3/admin')), call('/api/v3/orders')), {
        timeout: 5_000,
        interval: 20,
      })
      .toBe(200);
    admin.push(await call('/api/v3/admin'));
    expect(admin).not.toContain(200);
    expect(gate.logs.filter((l) => l.includes('policy file loaded'))).toHaveLength(1);
  });
});
