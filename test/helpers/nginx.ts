import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './deploy.js';
import { freePort } from './free-port.js';

/** The shipped nginx config and the placeholders its header documents. */
export const FORWARD_AUTH_CONF = join(repoRoot, 'deploy/nginx/forward-auth.conf');
export const PLACEHOLDERS = ['__LISTEN__', '__KEYGATE__', '__UPSTREAM__'] as const;

export interface RunningNginx {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** What nginx wrote to stderr (error_log stderr) and stdout (access log). */
  output(): string;
  stop(): Promise<void>;
}

export function nginxAvailable(): boolean {
  const r = spawnSync('nginx', ['-V'], { encoding: 'utf8' });
  return !r.error && r.stderr.includes('--with-http_auth_request_module');
}

/** The shipped file with only its documented placeholders filled in; refuses to run if one is left. */
function fillPlaceholders(values: Record<(typeof PLACEHOLDERS)[number], string>): string {
  let conf = readFileSync(FORWARD_AUTH_CONF, 'utf8');
  for (const name of PLACEHOLDERS) conf = conf.split(name).join(values[name]);
  if (/__[A-Z]+__/.test(conf)) throw new Error(`undocumented placeholder left in ${FORWARD_AUTH_CONF}`);
  return conf;
}

/**
 * Runs deploy/nginx/forward-auth.conf exactly as shipped (placeholders filled) under a throwaway
 * prefix: `nginx -p <dir> -c <dir>/nginx.conf -e stderr -g "daemon off;"`, in the foreground.
 * Fails loudly, never skips, when nginx with auth_request is missing.
 */
export async function startNginx(keygate: string, upstream: string): Promise<RunningNginx> {
  if (!nginxAvailable())
    throw new Error(
      'nginx with the auth_request module is not on PATH: apt-get install -y nginx (npm run test:all installs it)',
    );
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-nginx-'));
  // nginx's workers drop root privileges: they must be able to reach the prefix.
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'tmp'));
  const file = join(dir, 'nginx.conf');
  writeFileSync(
    file,
    fillPlaceholders({
      __LISTEN__: `127.0.0.1:${port}`,
      __KEYGATE__: new URL(keygate).host,
      __UPSTREAM__: new URL(upstream).host,
    }),
  );
  let out = '';
  const proc: ChildProcess = spawn('nginx', ['-p', dir, '-c', file, '-e', 'stderr', '-g', 'daemon off;'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const deadline = Date.now() + 10_000;
  while (!(await accepts(port))) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`nginx did not start: ${out}`);
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
        proc.kill('SIGQUIT');
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
