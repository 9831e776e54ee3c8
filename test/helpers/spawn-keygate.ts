import type { ChildProcessByStdio } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import * as harness from '../../scripts/harness/spawn-keygate.mjs';
import { parseExposition, valueOf } from './exposition.js';
import { guard } from './slowdown.js';

/**
 * Keygate as a child process, for tests: scripts/harness/spawn-keygate.mjs (shared with the benchmark
 * and soak scripts) starts it; this adds what tests read from it, its JSON log lines, /proc figures and
 * metrics. bin/keygate.js runs dist/, which the global setup of the tiers that use it rebuilds.
 * In-process Keygate for tests is test/helpers/keygate.ts (startKeygate).
 *   runKeygate    one CLI command to its end (`keys create`, `token`, ...): its stdout and stderr
 *   spawnKeygate  a long-running command as it is started, nothing waited for (to see it refuse to start)
 *   serveKeygate  `keygate serve` (or `demo`) on free loopback ports, resolved once /healthz answers
 */
export { runKeygate, type ChildEnv } from '../../scripts/harness/spawn-keygate.mjs';

export type SpawnOptions = Omit<harness.SpawnOptions, 'log'>;
type Exit = harness.Exit;

export interface KeygateProcess {
  readonly child: ChildProcessByStdio<null, Readable, Readable>;
  readonly pid: number;
  /** The JSON log lines written to stdout so far. */
  lines(): Array<Record<string, unknown>>;
  /** Resolves with the first log line `match` accepts (a message, or a predicate), as soon as it is written. */
  line(
    match: string | ((line: Record<string, unknown>) => boolean),
    timeoutMs?: number,
  ): Promise<Record<string, unknown>>;
  stderr(): string;
  /** Everything written to stdout and stderr, for failure messages. */
  output(): string;
  readonly exited: Promise<Exit>;
  /** Open file descriptors of the process (sockets included), from /proc. */
  fds(): number;
  /** Resident set size in bytes, from /proc. */
  rss(): number;
  /** Sends `signal` (SIGTERM by default), SIGKILL after 5 s, and resolves when the process has exited. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

/** Adds log-line parsing and /proc readings to a child started with pipes (no `log` file). */
function forTests(p: harness.KeygateChild): KeygateProcess {
  const child = p.child as ChildProcessByStdio<null, Readable, Readable>;
  // stdout can still hold lines when 'exit' fires: a line is missing only once the pipe has closed.
  let drained = false;
  child.stdout.once('close', () => (drained = true));
  const lines: Array<Record<string, unknown>> = [];
  let parsedUpTo = 0;
  // Parses the complete lines written since the last call (the harness keeps stdout as text).
  const parsed = () => {
    const out = p.stdout();
    const end = out.lastIndexOf('\n') + 1;
    for (const l of out.slice(parsedUpTo, end).split('\n')) {
      if (!l.startsWith('{')) continue;
      try {
        lines.push(JSON.parse(l) as Record<string, unknown>);
      } catch {
        // Not a log line (a CLI's own output): stays in output() only.
      }
    }
    parsedUpTo = Math.max(parsedUpTo, end);
    return lines;
  };
  const { pid } = p;
  return {
    child,
    pid,
    lines: parsed,
    async line(match, timeoutMs = guard(15_000)) {
      const accepts = typeof match === 'string' ? (l: Record<string, unknown>) => l.msg === match : match;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const wasDrained = drained;
        const found = parsed().find(accepts);
        if (found) return found;
        if (Date.now() > deadline || wasDrained) throw new Error(`keygate wrote no such line:\n${p.output()}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    stderr: p.stderr,
    output: p.output,
    exited: p.exited,
    fds: () => readdirSync(`/proc/${pid}/fd`).length,
    rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024,
    stop: p.stop,
  };
}

/** `keygate <args>` as a child process, returned at once. */
export function spawnKeygate(args: string[], options: SpawnOptions = {}): KeygateProcess {
  return forTests(harness.spawnKeygate(args, options));
}

export interface ServedKeygate extends KeygateProcess {
  readonly port: number;
  readonly adminPort: number;
  readonly url: string;
  readonly adminUrl: string;
  /** A gauge or counter value from /metrics (the series with that name and no labels). */
  metric(name: string): Promise<number>;
}

/**
 * `keygate serve` (or `args`, e.g. ['demo']) as an operator runs it, on free ports of 127.0.0.1, with no
 * Redis and no keys file unless `env` names them. Resolves once the admin /healthz answers; rejects with
 * the process's output if it exits or is not healthy within 25 s (scaled by the run's measured slowdown: a
 * busy machine may take seconds to start Node, which is no failure).
 */
export async function serveKeygate(
  env: harness.ChildEnv,
  options: { args?: string[]; baseEnv?: 'inherit' | 'clean' } = {},
): Promise<ServedKeygate> {
  const served = await harness.serveKeygate(env, { ...options, timeoutMs: guard(25_000) });
  const { port, adminPort, url, adminUrl } = served;
  return {
    ...forTests(served),
    port,
    adminPort,
    url,
    adminUrl,
    async metric(name) {
      const value = valueOf(parseExposition(await (await fetch(`${adminUrl}/metrics`)).text()), name);
      if (value === undefined) throw new Error(`metric ${name} not found`);
      return value;
    },
  };
}
