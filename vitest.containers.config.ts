import { defineConfig } from 'vitest/config';

// The container tier (scripts/container-tests.sh sets up Podman and builds the images first).
export default defineConfig({
  test: {
    include: ['test/container/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 300_000,
    pool: 'forks',
    // One file at a time: the compose stack publishes fixed host ports.
    fileParallelism: false,
  },
});
