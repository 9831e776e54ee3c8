import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { nowNonce, token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const run = promisify(execFile);
const SECRET = 'client-secret-0123456789abcdef';

/** A python3 that has PyJWT, if any (pyenv's first, then Debian's). */
function pythonWithJwt(): string | undefined {
  for (const py of ['python3', '/usr/bin/python3']) {
    if (spawnSync(py, ['-c', 'import jwt'], { stdio: 'ignore' }).status === 0) return py;
  }
  return undefined;
}

describe('API clients against a running Keygate', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, keys: [makeKey({ apiKey: 'client', secret: SECRET })] });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('the package export (import "keygate") mints tokens that pass, and withKeygateAuth sets the header for fetch', async () => {
    const client = await import('keygate');
    const t = await client.createToken({ apiKey: 'client', apiSecret: SECRET, recvWindow: 10 });
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) })).status).toBe(200);
    const init = await client.withKeygateAuth({ method: 'GET' }, { apiKey: 'client', apiSecret: SECRET });
    const res = await fetch(`${gate.url}${ACCOUNTS_PATH}`, init);
    expect(res.status).toBe(200);
    // Two tokens minted back to back never share a nonce.
    const [t1, t2] = await Promise.all([
      client.createToken({ apiKey: 'client', apiSecret: SECRET }),
      client.createToken({ apiKey: 'client', apiSecret: SECRET }),
    ]);
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t1) })).status).toBe(200);
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t2) })).status).toBe(200);
  });

  it('serves the server time without authentication, and puts it on nonce-window errors', async () => {
    const before = BigInt(Date.now()) * 1_000_000n;
    const res = await send(gate.url, '/api/v3/time');
    expect(res.status).toBe(200);
    const { serverTime } = res.json() as { serverTime: string };
    expect(BigInt(serverTime) >= before - 1_000_000n).toBe(true);
    expect(res.headers['x-server-time']).toBe(serverTime);
    expect(upstream.received.some((r) => r.url === '/api/v3/time')).toBe(false);

    const stale = await send(gate.url, ACCOUNTS_PATH, {
      headers: bearer(token('client', SECRET, { nonce: nowNonce(-60_000) })),
    });
    expect(stale.status).toBe(401);
    expect(stale.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    const drift = BigInt(stale.headers['x-server-time'] as string) - BigInt(Date.now()) * 1_000_000n;
    expect(drift < 5_000_000_000n && drift > -5_000_000_000n).toBe(true);
    // Other 40106 causes do not carry it.
    const forged = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('client', 'wrong-secret-0123456789')) });
    expect(forged.headers['x-server-time']).toBeUndefined();
  });

  it('the CLI token passes (curl example)', async () => {
    // As the README shows it: the secret in KEYGATE_API_SECRET, off the command line.
    const { stdout } = await runKeygate(['token', '--key', 'client'], { KEYGATE_API_SECRET: SECRET });
    expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(stdout.trim()) })).status).toBe(200);
  });

  it('the Python example (PyJWT) passes', async () => {
    const py = pythonWithJwt();
    if (!py)
      throw new Error(
        'no python3 with PyJWT: install it (apt-get install -y python3-jwt, as npm run test:all does) to run the README Python example',
      );
    const { stdout } = await run(py, ['examples/python_client.py', `${gate.url}${ACCOUNTS_PATH}`, 'client', SECRET]);
    expect(stdout).toMatch(/^200 /);
  });
});

describe('keygate/client subpath', () => {
  /** Modules a fresh process has loaded after importing the specifier (from the built package, as a user would). */
  async function loadedBy(specifier: string): Promise<string[]> {
    const script = `await import(${JSON.stringify(specifier)}); const { createRequire } = await import('node:module'); const req = createRequire(process.cwd() + '/'); console.log(JSON.stringify(Object.keys(req.cache)));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: process.cwd() });
    return JSON.parse(stdout) as string[];
  }
  it('loads nothing of the server: no ioredis, prom-client, pino, undici or yaml', async () => {
    const { createToken } = await import('keygate/client');
    expect(typeof createToken).toBe('function');
    const loaded = await loadedBy('keygate/client');
    for (const server of ['ioredis', 'prom-client', 'pino', 'undici', 'yaml'])
      expect(
        loaded.filter((m) => m.includes(`/node_modules/${server}/`)),
        server,
      ).toEqual([]);
    // The full entry point does load them (the check can fail).
    const full = await loadedBy('keygate');
    expect(full.some((m) => m.includes('/node_modules/ioredis/'))).toBe(true);
  });
});
