import { spawnSync } from 'node:child_process';
import { configDefaults, defineConfig } from 'vitest/config';
import { measureSlowdown } from './test/helpers/slowdown.js';

/**
 * Test tiers, one vitest project each (`vitest run --project unit`):
 *   unit         pure functions and in-memory parts, no sockets, no child processes (seconds)
 *   repo         checks of the repository itself: the docs against the code, the layer table, the test index,
 *                every source file's test, a quiet npm ci
 *   e2e          Keygate in-process on real sockets, with real Redis, routers, browsers and clients
 *   adversarial  attacks over raw sockets; each case checks the answer and what the upstream received
 *   process      bin/keygate.js and the scripts as child processes
 *   deploy       the Dockerfile, compose file, Kubernetes manifests, nginx and Prometheus assets
 *   regions      three simulated regions on this machine (network namespaces joined by a delay line; needs root)
 * The container tier (test/container) builds and runs images: scripts/container-tests.sh (vitest.containers.config.ts).
 */
const BUILDS_DIST = ['test/helpers/build-dist.ts'];
const tier = (name: string, globalSetup: string[] = BUILDS_DIST) => ({
  extends: true as const,
  test: { name, include: [`test/${name}/**/*.test.ts`], globalSetup },
});
/**
 * The tiers without sockets or child processes share each worker's module cache between their files (isolate:
 * false): most of the unit tier's time went to loading the same modules again in a fresh process for each file.
 * Their tests build every part from a factory (no module-level state to leak) and restore any timer or spy they
 * fake; a file that needs a process of its own belongs in another tier.
 */
const shared = (name: string) => {
  const t = tier(name, []);
  return { ...t, test: { ...t.test, isolate: false } };
};

// Hang guards (test and hook timeouts, child-process deadlines) scale with how busy the machine is right now, measured
// once here; the workers read it from the environment (test/helpers/slowdown.ts). Assertions never use it.
const measured = process.env.KEYGATE_TEST_SLOWDOWN === undefined;
const slowdown = measureSlowdown(process.env, () => {
  const started = performance.now();
  spawnSync(process.execPath, ['-e', '0']);
  return performance.now() - started;
});
process.env.KEYGATE_TEST_SLOWDOWN = String(slowdown);
if (measured && slowdown > 1)
  console.log(`[slowdown] this machine starts Node ${slowdown}x slower than a quiet one: hang guards scaled`);

export default defineConfig({
  test: {
    exclude: [...configDefaults.exclude, 'test/container/**'],
    testTimeout: 30_000 * slowdown,
    hookTimeout: 30_000 * slowdown,
    pool: 'forks',
    // Tests start real servers on real ports; keep CPU contention sane on 2 cores.
    maxWorkers: 2,
    projects: [
      shared('unit'),
      shared('repo'),
      tier('e2e'),
      tier('adversarial'),
      tier('process'),
      tier('deploy'),
      tier('regions'),
    ],
  },
});
