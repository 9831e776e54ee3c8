import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * The container tier's settings, exported by scripts/container-tests.sh. Outside
 * that script the tier must not pass by accident: it refuses to run at all.
 */
export function tier(): { image: string; runtimeBase: string; composeProject: string; dockerHost: string } {
  const image = process.env.KEYGATE_CT_IMAGE;
  const runtimeBase = process.env.KEYGATE_CT_RUNTIME_BASE;
  const composeProject = process.env.KEYGATE_CT_COMPOSE_PROJECT;
  const dockerHost = process.env.DOCKER_HOST;
  if (!image || !runtimeBase || !composeProject || !dockerHost || !process.env.CONTAINERS_CONF) {
    throw new Error(
      'the container tests run through scripts/container-tests.sh (npm run test:containers), which builds the images and sets up Podman',
    );
  }
  return { image, runtimeBase, composeProject, dockerHost };
}

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion; never throws on a non-zero exit (the caller asserts on `code`). */
export async function exec(cmd: string, args: string[], timeoutMs = 120_000): Promise<Result> {
  try {
    const { stdout, stderr } = await run(cmd, args, { timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number | string; stdout?: string; stderr?: string; message: string };
    if (typeof err.code !== 'number') throw e;
    return { code: err.code, stdout: err.stdout ?? '', stderr: err.stderr ?? '' };
  }
}

export const podman = (args: string[], timeoutMs?: number) => exec('podman', args, timeoutMs);

/** Like podman(), but a non-zero exit is an error that carries podman's stderr. */
export async function podmanOk(args: string[], timeoutMs?: number): Promise<string> {
  const r = await podman(args, timeoutMs);
  if (r.code !== 0) throw new Error(`podman ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * Runs `podman healthcheck run` every `intervalMs` until stopped. Podman runs
 * periodic healthchecks through systemd timers, and there is no systemd here:
 * without this loop a container stays "starting" for ever, and compose's
 * `depends_on: condition: service_healthy` never lets its dependants start.
 */
export function driveHealthchecks(containers: () => Promise<string[]>, intervalMs = 1_000): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const c of await containers().catch(() => []))
        await podman(['healthcheck', 'run', c], 10_000).catch(() => undefined);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** A command left running (e.g. `docker-compose up`), with its output kept for failure messages. */
export function background(cmd: string, args: string[]): { exited: Promise<number>; output(): string } {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
  return { exited, output: () => out };
}
