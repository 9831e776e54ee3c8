import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from './redis-server.js';

const BIN = fileURLToPath(new URL('../../bin/keygate.js', import.meta.url));

export interface ChildKeygate {
  readonly proc: ChildProcess;
  readonly pid: number;
  readonly port: number;
  readonly adminPort: number;
  /** Open file descriptors of the process (sockets included), from /proc. */
  fds(): number;
  /** Resident set size in bytes, from /proc. */
  rss(): number;
  /** A gauge or counter value from /metrics (first series with that name). */
  metric(name: string): Promise<number>;
  stop(): Promise<void>;
}

/**
 * `keygate serve` (the built bin/keygate.js) as a child process: its memory
 * and sockets are its own, so RSS and fd counts measure Keygate alone.
 * Needs `npm run build` (npm test does it).
 */
export async function spawnKeygate(env: Record<string, string>): Promise<ChildKeygate> {
  const port = await freePort();
  const adminPort = await freePort();
  const proc = spawn(process.execPath, [BIN, 'serve'], {
    env: { PATH: process.env.PATH ?? '', KEYGATE_HOST: '127.0.0.1', KEYGATE_ADMIN_HOST: '127.0.0.1', ...env, KEYGATE_PORT: String(port), KEYGATE_ADMIN_PORT: String(adminPort) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  let exited = false;
  proc.stderr?.on('data', (c: Buffer) => (stderr += c.toString()));
  proc.once('exit', () => (exited = true));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (exited) throw new Error(`keygate exited at start: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`keygate did not become healthy: ${stderr}`);
    const ok = await fetch(`http://127.0.0.1:${adminPort}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const ports = { port, adminPort };
  const pid = proc.pid as number;
  return {
    proc,
    pid,
    ...ports,
    fds: () => readdirSync(`/proc/${pid}/fd`).length,
    rss: () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024,
    async metric(name) {
      const text = await (await fetch(`http://127.0.0.1:${ports.adminPort}/metrics`)).text();
      const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
      if (!m) throw new Error(`metric ${name} not found`);
      return Number(m[1]);
    },
    stop: () =>
      new Promise((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 5_000).unref();
      }),
  };
}
