// Tested in test/process/cli.test.ts (--version), test/e2e/metrics.test.ts (keygate_build_info).
import { readFileSync } from 'node:fs';

/** Keygate's version, from the package.json shipped beside dist/. */
export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}
