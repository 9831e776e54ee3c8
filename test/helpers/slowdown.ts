/**
 * How much slower than a quiet machine this one is during this run, for hang guards only: a test timeout or a
 * child-process deadline turns a hang into a failure with a message, and on a machine busy with other work (load
 * average 6 to 20 on 2 cores) the same correct run takes many times longer. Measured once per run by vitest.config.ts
 * (starting `node -e 0`, median of five) and passed to the workers in KEYGATE_TEST_SLOWDOWN. No assertion about
 * behaviour may use it: a bound that tells two behaviours apart comes from the timers involved, not from this.
 */

/** `node -e 0` on a quiet 2-core machine takes about 40 to 60 ms; 100 ms leaves room, so a quiet machine gets 1. */
export const QUIET_NODE_START_MS = 100;
/** However busy the machine, a hang is still reported, at most this many times later. */
export const MAX_SLOWDOWN = 20;

export function measureSlowdown(env: NodeJS.ProcessEnv, timeNodeStartMs: () => number): number {
  const given = Number(env.KEYGATE_TEST_SLOWDOWN);
  if (Number.isFinite(given) && given >= 1) return Math.min(given, MAX_SLOWDOWN);
  const samples = Array.from({ length: 5 }, timeNodeStartMs).sort((a, b) => a - b);
  const median = samples[2] as number;
  return Math.min(MAX_SLOWDOWN, Math.max(1, Math.ceil(median / QUIET_NODE_START_MS)));
}

/** The factor measured for this run (1 outside vitest). */
export const SLOWDOWN = Math.min(MAX_SLOWDOWN, Math.max(1, Number(process.env.KEYGATE_TEST_SLOWDOWN) || 1));

/** A hang guard of `ms` on a quiet machine, scaled for this run. */
export const guard = (ms: number): number => Math.round(ms * SLOWDOWN);
