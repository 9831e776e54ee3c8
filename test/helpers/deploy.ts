import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const repoRoot = new URL('../..', import.meta.url).pathname;

/**
 * Every KEYGATE_* name that appears in the source (what the code can read). `except` leaves one src file
 * out: test/unit/env-names.test.ts compares the runtime list (src/config/env-names.ts) with the rest.
 */
export function envNamesInCode(options: { except?: string } = {}): Set<string> {
  const names = new Set<string>();
  for (const d of readdirSync(join(repoRoot, 'src'), { recursive: true, withFileTypes: true })) {
    if (!d.isFile() || !d.name.endsWith('.ts')) continue;
    if (options.except && join(d.parentPath, d.name) === join(repoRoot, options.except)) continue;
    for (const m of readFileSync(join(d.parentPath, d.name), 'utf8').matchAll(/KEYGATE_[A-Z0-9_]*[A-Z0-9]/g))
      names.add(m[0]);
  }
  return names;
}

/** `--flag value` or `--flag=value` from an argv. */
export function flag(argv: readonly string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === name) return argv[i + 1];
    if (argv[i]!.startsWith(`${name}=`)) return argv[i]!.slice(name.length + 1);
  }
  return undefined;
}

/** Go/compose durations ("15s", "1m30s") and Kubernetes-style seconds, in ms. */
export function durationMs(d: string): number {
  let total = 0;
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 };
  const re = /(\d+(?:\.\d+)?)(ns|us|ms|s|m|h)/g;
  let consumed = '';
  for (const m of d.matchAll(re)) {
    total += Number(m[1]) * units[m[2]!]!;
    consumed += m[0];
  }
  if (consumed !== d) throw new Error(`not a duration: ${d}`);
  return total;
}
