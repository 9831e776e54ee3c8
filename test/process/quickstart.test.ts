import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { send, bearer } from '../helpers/http.js';
import { freePort } from '../helpers/redis-server.js';

const run = promisify(execFile);

/** The README quickstart, as a new user runs it: `keygate demo`, then a token from the CLI. */
describe('README quickstart', () => {
  it('gets a 200 through Keygate with the demo key', async () => {
    const port = await freePort();
    const adminPort = await freePort();
    const child = spawn('node', ['bin/keygate.js', 'demo'], {
      env: { ...process.env, KEYGATE_PORT: String(port), KEYGATE_ADMIN_PORT: String(adminPort), KEYGATE_REDIS_URL: '', KEYGATE_KEYS_FILE: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await expect.poll(() => out.includes('keygate started'), { timeout: 10_000 }).toBe(true);
      const { stdout } = await run('node', ['bin/keygate.js', 'token', '--key', 'demo-key', '--secret', 'demo-secret-0123456789abcdef']);
      const res = await send(`http://127.0.0.1:${port}`, '/api/v3/viewer/accounts', { headers: bearer(stdout.trim()) });
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({ apiKeyId: 'demo', path: '/api/v3/viewer/accounts' });
      const health = await fetch(`http://127.0.0.1:${adminPort}/healthz`);
      expect(health.status).toBe(200);
    } finally {
      child.kill('SIGTERM');
    }
  });
});
