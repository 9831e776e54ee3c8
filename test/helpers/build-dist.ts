import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

/**
 * Vitest global setup for the tiers that run `dist/` (bin/keygate.js, child processes, the image build):
 * compile src/ incrementally so a test never runs stale JavaScript. The build info lives inside dist/, so
 * deleting dist/ forces a full build. Several projects list this setup; it compiles once per vitest run.
 */
export default function buildDist(): void {
  if (process.env.KEYGATE_TEST_DIST_BUILT === '1') return;
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(
    process.execPath,
    [tsc, '-p', 'tsconfig.build.json', '--incremental', '--tsBuildInfoFile', 'dist/.tsbuildinfo'],
    { stdio: 'inherit' },
  );
  process.env.KEYGATE_TEST_DIST_BUILT = '1';
}
