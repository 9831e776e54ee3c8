import { spawnSync } from 'node:child_process';

export interface ToolRun {
  status: number | null;
  output: string;
}

let cached: string | null | undefined;

/** promtool's version line when it is on PATH (Debian package `prometheus`), else null. */
export function promtoolVersion(): string | null {
  if (cached === undefined) {
    const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
    cached = r.status === 0 ? ((r.stdout || r.stderr).split('\n')[0] ?? 'promtool') : null;
  }
  return cached;
}

export function runPromtool(args: string[], input?: string): ToolRun {
  const r = spawnSync('promtool', args, { encoding: 'utf8', input, timeout: 60_000 });
  return { status: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}

/**
 * Says loudly that a promtool check did not run (never a silent skip): a
 * console line in the test output and a test annotation.
 */
export async function recordPromtoolAbsent(
  annotate: (message: string, type?: string) => Promise<unknown>,
  what: string,
): Promise<void> {
  const message = `promtool not on PATH: "${what}" NOT run (install the Debian package "prometheus", or run KEYGATE_TEST_ALL_PROMTOOL=1 npm run test:all). The in-process checks still ran.`;
  console.warn(`[keygate tests] ${message}`);
  await annotate(message, 'warning');
}
