import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';

/** A proxy (nginx, Caddy) run in the foreground from a throwaway dir, with a shipped recipe. */
export interface RunningProxy {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** What the proxy wrote to stdout and stderr. */
  output(): string;
  stop(): Promise<void>;
}

/** A shipped recipe with only its documented placeholders filled in; refuses to run if one is left. */
export function fillShippedFile<N extends string>(
  file: string,
  names: readonly N[],
  values: Record<N, string>,
): string {
  let conf = readFileSync(file, 'utf8');
  for (const name of names) conf = conf.split(name).join(values[name]);
  if (/__[A-Z]+__/.test(conf)) throw new Error(`undocumented placeholder left in ${file}`);
  return conf;
}

/**
 * Starts `command args` and resolves once 127.0.0.1:port accepts connections (10 s at most, or it
 * fails with the output). `stop` sends `stopSignal` (SIGKILL after 3 s) and removes `dir`.
 */
export async function runUntilListening(
  command: string,
  args: readonly string[],
  options: { port: number; dir: string; stopSignal: NodeJS.Signals; env?: NodeJS.ProcessEnv },
): Promise<RunningProxy> {
  const { port, dir, stopSignal } = options;
  let out = '';
  const proc: ChildProcess = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.env && { env: options.env }),
  });
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`${command} did not start: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: proc.pid as number,
    output: () => out,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill(stopSignal);
        await Promise.race([exited, new Promise((r) => setTimeout(r, 3_000))]);
        if (proc.exitCode === null) proc.kill('SIGKILL');
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** True once something accepts TCP connections on 127.0.0.1:port. */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
