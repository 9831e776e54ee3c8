import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { staleReason } from '../../scripts/build-if-stale.mjs';
import { freePort } from '../../scripts/harness/free-port.mjs';
import { guard } from '../helpers/slowdown.js';

/**
 * Issue 41 item 3: `npm start` (and `npm run demo`) ran `tsc` before every start (9.7-18 s against 0.8 s
 * for `node bin/keygate.js serve`). On a built tree (the global setup builds dist/) they must not.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = join(ROOT, 'dist');
const mtimes = () =>
  Object.fromEntries(
    readdirSync(DIST, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js'))
      .map((f) => [f, statSync(join(DIST, f)).mtimeMs]),
  );

/** Runs `command` in the repository on free ports until /healthz answers; its output and the ms it took. */
async function startUntilHealthy(command: string[]): Promise<{ output: string; ms: number }> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const started = Date.now();
  const child = spawn(command[0]!, command.slice(1), {
    cwd: ROOT,
    detached: true, // its own process group: npm's child (node bin/keygate.js) is stopped with it
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_REDIS_URL: '',
      KEYGATE_KEYS_FILE: '',
      KEYGATE_PORT: String(port),
      KEYGATE_ADMIN_PORT: String(adminPort),
    },
  });
  let output = '';
  child.stdout.on('data', (c) => (output += String(c)));
  child.stderr.on('data', (c) => (output += String(c)));
  const exited = new Promise((r) => child.once('exit', r));
  try {
    const deadline = Date.now() + guard(60_000);
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${command.join(' ')} exited:\n${output}`);
      if (Date.now() > deadline) throw new Error(`${command.join(' ')} not healthy:\n${output}`);
      const ok = await fetch(`http://127.0.0.1:${adminPort}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return { output, ms: Date.now() - started };
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  }
}

describe('npm start on a built tree', () => {
  it('does not run tsc: no build step in its output, dist/ untouched', async () => {
    expect(staleReason(ROOT)).toBeUndefined(); // the global setup built it
    const before = mtimes();
    const npm = await startUntilHealthy(['npm', 'start']);
    const direct = await startUntilHealthy([process.execPath, 'bin/keygate.js', 'serve']);
    // npm prints each script it runs ("> keygate@0.2.0 build" / "> tsc -p tsconfig.build.json").
    expect(npm.output).not.toMatch(/^> (tsc|npm run build)/m);
    expect(npm.output).not.toContain('rebuilding');
    expect(npm.output).toContain('> node scripts/build-if-stale.mjs');
    expect(mtimes()).toEqual(before);
    console.log(
      `[npm-start] healthy after ${npm.ms} ms with npm start, ${direct.ms} ms with node bin/keygate.js serve`,
    );
  });
});
