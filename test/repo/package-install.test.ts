import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * `npm ci` on the Node the README names prints no warning (issue 35 item 16): no locked package asks for a newer
 * Node than package.json's engines allows (EBADENGINE), and every package with an install script has a decision in
 * allowScripts (npm 11 warns about the others). Range semantics are npm's own: the semver package npm uses, here
 * through the dev tools that depend on it (it has no types of its own, hence the narrow signature).
 */
const semver = createRequire(import.meta.url)('semver') as {
  minVersion(range: string): { version: string } | null;
  satisfies(version: string, range: string): boolean;
};
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
  engines: { node: string };
  allowScripts?: Record<string, boolean>;
};
type Locked = { version?: string; engines?: { node?: string } | string[]; hasInstallScript?: boolean };
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as { packages: Record<string, Locked> };
const locked = Object.entries(lock.packages)
  .filter(([path]) => path !== '')
  .map(([path, p]) => ({ name: path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length), ...p }));

describe('a clean npm ci is quiet', () => {
  const oldest = semver.minVersion(pkg.engines.node)?.version as string;

  it('the oldest Node package.json allows is a real version', () => {
    expect(oldest).toMatch(/^20\.\d+\.\d+$/);
  });

  it('no locked package needs a newer Node than that (EBADENGINE)', () => {
    const needNewer = locked
      .filter((p) => p.engines && !Array.isArray(p.engines) && p.engines.node)
      .filter((p) => !semver.satisfies(oldest, (p.engines as { node: string }).node))
      .map((p) => `${p.name}@${p.version} needs node ${(p.engines as { node: string }).node}`);
    expect(needNewer).toEqual([]);
  });

  it('every package with an install script has a decision in allowScripts', () => {
    const withScripts = [...new Set(locked.filter((p) => p.hasInstallScript).map((p) => p.name))].sort();
    expect(withScripts.length).toBeGreaterThan(0);
    expect(Object.keys(pkg.allowScripts ?? {}).sort()).toEqual(withScripts);
  });
});
