import { chmodSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runKeygate, serveKeygate } from '../helpers/spawn-keygate.js';
import { freePort } from '../helpers/free-port.js';
import { ACCOUNTS_PATH, DEMO_KEY, DEMO_SECRET } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';

const dir = () => mkdtempSync(join(tmpdir(), 'keygate-assertion-cli-'));
const failing = (args: string[], env: Record<string, string>) =>
  runKeygate(args, env).then(
    () => ({ code: 0, stderr: '' }),
    (e: { code: number | null; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
  );

describe('keygate assertion keygen / jwks, and check-config with the assertion on', () => {
  it('keygen creates a 0600 JWK Set, then adds keys at the end; jwks prints the public parts only', async () => {
    const file = join(dir(), 'assertion.json');
    const first = (await runKeygate(['assertion', 'keygen', '--alg', 'EdDSA', '--out', file], {})).stdout.trim();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const second = (await runKeygate(['assertion', 'keygen', '--alg', 'ES256', '--out', file, '--kid', 'next'], {}))
      .stdout;
    expect(second.trim()).toBe('next');
    const stored = JSON.parse(readFileSync(file, 'utf8')) as { keys: Record<string, string>[] };
    expect(stored.keys.map((k) => [k.kid, k.alg, k.crv, typeof k.d])).toEqual([
      [first, 'EdDSA', 'Ed25519', 'string'],
      ['next', 'ES256', 'P-256', 'string'],
    ]);
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const { stdout } = await runKeygate(['assertion', 'jwks'], { KEYGATE_ASSERTION_KEYS_FILE: file });
    const published = JSON.parse(stdout) as { keys: Record<string, string>[] };
    expect(published.keys.map((k) => k.kid)).toEqual([first, 'next']);
    for (const [i, k] of published.keys.entries()) {
      expect(k).not.toHaveProperty('d');
      expect(stdout).not.toContain(stored.keys[i]!.d);
    }
    // A kid that is already in the set is refused, and the file is left as it was.
    const again = await failing(['assertion', 'keygen', '--out', file, '--kid', 'next'], {});
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('duplicate kid "next"');
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual(stored);
  });

  it('check-config shows the settings, never key material; a bad file is listed with the other problems', async () => {
    const file = join(dir(), 'assertion.json');
    await runKeygate(['assertion', 'keygen', '--out', file, '--kid', 'k1'], {});
    const d = (JSON.parse(readFileSync(file, 'utf8')) as { keys: { d: string }[] }).keys[0]!.d;
    const env = {
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_ASSERTION_KEYS_FILE: file,
      KEYGATE_ASSERTION_AUDIENCE: 'orders',
      KEYGATE_ASSERTION_MODE: 'request',
    };
    const { stdout } = await runKeygate(['check-config'], env);
    expect(JSON.parse(stdout.slice(stdout.indexOf('{')))).toMatchObject({
      assertion: { keysFile: file, audience: 'orders', issuer: 'keygate', ttlSeconds: 60, mode: 'request' },
    });
    expect(stdout).not.toContain(d);

    chmodSync(file, 0o644);
    const bad = await failing(['check-config'], { ...env, KEYGATE_ASSERTION_TTL_SECONDS: '900', KEYGATE_PORT: 'x' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('KEYGATE_PORT');
    expect(bad.stderr).toContain('KEYGATE_ASSERTION_TTL_SECONDS');
    expect(bad.stderr).toContain(
      'KEYGATE_ASSERTION_KEYS_FILE: ' + file + ': holds private keys but is open to other users',
    );
    expect(bad.stderr).not.toContain(d);
  });
});

describe('keygate demo --assertion', () => {
  it('the demo upstream believes only the assertion: through Keygate 200, direct with a forged X-Api-Key-Id 401', async () => {
    const upstreamPort = await freePort();
    const child = await serveKeygate(
      { KEYGATE_DEMO_UPSTREAM_PORT: String(upstreamPort) },
      { args: ['demo', '--assertion'] },
    );
    try {
      await child.line('keygate started', 10_000);
      const { stdout } = await runKeygate(['token', '--key', DEMO_KEY, '--secret', DEMO_SECRET]);
      const through = await send(child.url, ACCOUNTS_PATH, { headers: bearer(stdout.trim()) });
      expect(through.status).toBe(200);
      expect(through.json()).toMatchObject({ apiKeyId: 'demo', assertedKeyId: 'demo' });
      const direct = await send(`http://127.0.0.1:${upstreamPort}`, ACCOUNTS_PATH, {
        headers: { 'X-Api-Key-Id': 'demo' },
      });
      expect(direct.status).toBe(401);
      expect(direct.json()).toEqual({ upstream: 'demo', refused: 'X-Keygate-Assertion', reason: 'missing' });
      const jwks = await send(child.adminUrl, '/.well-known/jwks.json');
      expect((jwks.json() as { keys: unknown[] }).keys).toHaveLength(1);
    } finally {
      await child.stop();
    }
  });
});
