import { guard } from './slowdown.js';
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseExposition, valueOf } from './exposition.js';
import { freePort } from './free-port.js';

/**
 * Keygate as a child process: the built CLI (bin/keygate.js runs dist/, which the global setup of the
 * tiers that use it rebuilds). In-process Keygate for tests is test/helpers/keygate.ts (startKeygate).
 *   runKeygate    one CLI command to its end (`keys create`, `token`, ...): its stdout and stderr
 *   spawnKeygate  a long-running command as it is started, nothing waited for (to see it refuse to start)
 *   serveKeygate  `keygate serve` (or `demo`) on free loopback ports, resolved once /healthz answers
 */
const KEYGATE_BIN = fileURLToPath(new URL('../../bin/keygate.js', import.meta.url));

/** Variables on top of the base environment; `undefined` removes one (to run with Keygate's default). */
export type ChildEnv = Record<string, string | undefined>;

function environment(base: 'inherit' | 'clean', env: ChildEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = base === 'inherit' ? { ...process.env } : { PATH: process.env.PATH ?? '' };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete out[name];
    else out[name] = value;
  }
  return out;
}

const execFileAsync = promisify(execFile);

/**
 * Runs one CLI command with this environment plus `env`, `input` on its stdin (then closed; none by default);
 * rejects (with stdout, stderr and code) when it exits non-zero.
 */
export function runKeygate(
  args: string[],
  env: ChildEnv = {},
  input?: string,
): Promise<{ stdout: string; stderr: string }> {
  const run = execFileAsync(process.execPath, [KEYGATE_BIN, ...args], { env: environment('inherit', env) });
  run.child.stdin?.end(input);
  return run;
}

export interface SpawnOptions {
  /** Base environment: this process's (default), or PATH alone as in a container. */
  baseEnv?: 'inherit' | 'clean';
  env?: ChildEnv;
  /** Another tree's bin/keygate.js (an image layout assembled on disk); default this repository's. */
  bin?: string;
  cwd?: string;
}

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
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Open file descriptors of the process (sockets included), from /proc. */
  fds(): number;
  /** Resident set size in bytes, from /proc. */
  rss(): number;
  /** Sends `signal` (SIGTERM by default), SIGKILL after 5 s, and resolves when the process has exited. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
}

/** `keygate <args>` as a child process, returned at once. */
export function spawnKeygate(args: string[], options: SpawnOptions = {}): KeygateProcess {
  const child = spawn(process.execPath, [options.bin ?? KEYGATE_BIN, ...args], {
    env: environment(options.baseEnv ?? 'inherit', options.env ?? {}),
    ...(options.cwd && { cwd: options.cwd }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let partial = '';
  let err = '';
  const lines: Array<Record<string, unknown>> = [];
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
    const parts = (partial + c.toString()).split('\n');
    partial = parts.pop() ?? '';
    for (const p of parts) {
      if (!p.startsWith('{')) continue;
      try {
        lines.push(JSON.parse(p) as Record<string, unknown>);
      } catch {
        // Not a log line (a CLI's own output): stays in output() only.
      }
    }
  });
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  // stdout can still hold lines when 'exit' fires: a line is missing only once the pipe has closed.
  let drained = false;
  child.stdout.once('close', () => (drained = true));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const pid = child.pid as number;
  return {
    child,
    pid,
    lines: () => lines,
    async line(match, timeoutMs = guard(15_000)) {
      const accepts = typeof match === 'string' ? (l: Record<string, unknown>) => l.msg === match : match;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = lines.find(accepts);
        if (found) return found;
        if (Date.now() > deadline || drained) throw new Error(`keygate wrote no such line:\n${out}\n${err}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    stderr: () => err,
    output: () => `${out}\n${err}`,
    exited,
    fds: () => readdirSync(`/proc/${pid}/fd`).length,
    rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024,
    stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      }
      return exited;
    },
  };
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
 * Redis and no keys file unless `env` names them. Resolves once the admin /healthz answers (Keygate opens
 * the proxy port first); rejects with the process's output if it exits or is not healthy within 25 s (scaled by the run's measured slowdown).
 */
export async function serveKeygate(
  env: ChildEnv,
  options: { args?: string[]; baseEnv?: 'inherit' | 'clean' } = {},
): Promise<ServedKeygate> {
  const port = await freePort();
  const adminPort = await freePort();
  const p = spawnKeygate(options.args ?? ['serve'], {
    baseEnv: options.baseEnv ?? 'inherit',
    env: {
      KEYGATE_HOST: '127.0.0.1',
      KEYGATE_ADMIN_HOST: '127.0.0.1',
      KEYGATE_REDIS_URL: '',
      KEYGATE_KEYS_FILE: '',
      ...env,
      KEYGATE_PORT: String(port),
      KEYGATE_ADMIN_PORT: String(adminPort),
    },
  });
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  // Waits for an event (healthy, or exited). The deadline only turns a hang into a message with the output, so it
  // sits under the test timeout and scales with it: a busy machine may take seconds to start Node, which is no failure.
  const deadline = Date.now() + guard(25_000);
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null)
      throw new Error(`keygate exited at start:\n${p.output()}`);
    if (Date.now() > deadline) {
      await p.stop('SIGKILL');
      throw new Error(`keygate did not become healthy:\n${p.output()}`);
    }
    if (
      await fetch(`${adminUrl}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    ...p,
    port,
    adminPort,
    url: `http://127.0.0.1:${port}`,
    adminUrl,
    async metric(name) {
      const value = valueOf(parseExposition(await (await fetch(`${adminUrl}/metrics`)).text()), name);
      if (value === undefined) throw new Error(`metric ${name} not found`);
      return value;
    },
  };
}
