import { describe, expect, it } from 'vitest';
import { DEMO_KEY, DEMO_SECRET } from '../helpers/constants.js';
import { send, bearer } from '../helpers/http.js';
import { runKeygate, serveKeygate } from '../helpers/spawn-keygate.js';

/** The README quickstart, as a new user runs it: `keygate demo`, then a token from the CLI. */
describe('README quickstart', () => {
  it('gets a 200 through Keygate with the demo key', async () => {
    const child = await serveKeygate({}, { args: ['demo'] });
    try {
      await child.line('keygate started', 10_000);
      const { stdout } = await runKeygate(['token', '--key', DEMO_KEY, '--secret', DEMO_SECRET]);
      const res = await send(child.url, '/api/v3/viewer/accounts', { headers: bearer(stdout.trim()) });
      expect(res.status).toBe(200);
      expect(res.json()).toMatchObject({ apiKeyId: 'demo', path: '/api/v3/viewer/accounts' });
      const health = await fetch(`${child.adminUrl}/healthz`);
      expect(health.status).toBe(200);
    } finally {
      await child.stop();
    }
  });
});
