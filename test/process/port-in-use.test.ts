import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, portIsFree } from '../helpers/free-port.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { spawnKeygate } from '../helpers/spawn-keygate.js';

/**
 * Issue 35 item 1: a port already taken used to print "listen EADDRINUSE" and leave the process
 * running with nothing bound. Each case takes one port, starts Keygate, and expects exit status 1,
 * the setting named on stderr, and none of Keygate's other ports left bound.
 */
const holdPort = (): Promise<{ server: Server; port: number }> =>
  new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as { port: number }).port }));
  });

type Setting = 'KEYGATE_PORT' | 'KEYGATE_ADMIN_PORT' | 'KEYGATE_MANAGEMENT_PORT' | 'KEYGATE_DEMO_UPSTREAM_PORT';
const CASES: Array<{ name: string; args: string[]; taken: Setting; workers?: number }> = [
  { name: 'serve, proxy port taken', args: ['serve'], taken: 'KEYGATE_PORT' },
  { name: 'serve, admin port taken', args: ['serve'], taken: 'KEYGATE_ADMIN_PORT' },
  { name: 'serve, management port taken', args: ['serve'], taken: 'KEYGATE_MANAGEMENT_PORT' },
  { name: 'demo, proxy port taken', args: ['demo'], taken: 'KEYGATE_PORT' },
  { name: 'demo, upstream port taken', args: ['demo'], taken: 'KEYGATE_DEMO_UPSTREAM_PORT' },
  { name: '2 workers, proxy port taken (a worker cannot bind)', args: ['serve'], taken: 'KEYGATE_PORT', workers: 2 },
  {
    name: '2 workers, admin port taken (the primary cannot bind)',
    args: ['serve'],
    taken: 'KEYGATE_ADMIN_PORT',
    workers: 2,
  },
];

describe('a port already in use: exit 1 at once, naming the setting (real CLI process)', () => {
  let redis: TestRedis;
  let tokensFile: string;
  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    const dir = mkdtempSync(join(tmpdir(), 'keygate-port-'));
    tokensFile = join(dir, 'tokens.yaml');
    writeFileSync(tokensFile, 'tokens:\n  - name: ops\n    sha256: "' + '0'.repeat(64) + '"\n    access: read\n');
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it.each(CASES)('$name', async ({ args, taken, workers }) => {
    const held = await holdPort();
    const ports: Record<Setting, number> = {
      KEYGATE_PORT: await freePort(),
      KEYGATE_ADMIN_PORT: await freePort(),
      KEYGATE_MANAGEMENT_PORT: await freePort(),
      KEYGATE_DEMO_UPSTREAM_PORT: await freePort(),
      [taken]: held.port,
    };
    const env: Record<string, string> = {
      KEYGATE_HOST: '127.0.0.1',
      KEYGATE_ADMIN_HOST: '127.0.0.1',
      KEYGATE_KEYS_FILE: '',
      KEYGATE_REDIS_URL: workers ? redis.url : '',
      KEYGATE_WORKERS: String(workers ?? 1),
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_PORT: String(ports.KEYGATE_PORT),
      KEYGATE_ADMIN_PORT: String(ports.KEYGATE_ADMIN_PORT),
      KEYGATE_DEMO_UPSTREAM_PORT: String(ports.KEYGATE_DEMO_UPSTREAM_PORT),
    };
    if (taken === 'KEYGATE_MANAGEMENT_PORT')
      Object.assign(env, {
        KEYGATE_MANAGEMENT_HOST: '127.0.0.1',
        KEYGATE_MANAGEMENT_PORT: String(ports.KEYGATE_MANAGEMENT_PORT),
        KEYGATE_MANAGEMENT_TOKENS_FILE: tokensFile,
      });
    const p = spawnKeygate(args, { env });
    try {
      // Before the fix the process never exited: the test's own timeout is what would fail it.
      const { code } = await p.exited;
      expect(code, p.output()).toBe(1);
      expect(p.stderr()).toContain(`cannot listen on ${taken}`);
      expect(p.stderr()).toContain('already in use');
      for (const [setting, port] of Object.entries(ports))
        if (setting !== taken) expect(await portIsFree(port), `${setting} left bound`).toBe(true);
    } finally {
      await p.stop('SIGKILL');
      held.server.close();
    }
  });
});
