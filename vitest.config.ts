import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The container tier builds and runs images: scripts/container-tests.sh (vitest.containers.config.ts).
    exclude: [...configDefaults.exclude, 'test/container/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Tests start real servers on real ports; keep CPU contention sane on 2 cores.
    maxWorkers: 2,
  },
});
