import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './deploy.js';
import { freePort } from './free-port.js';
import { fillShippedFile, runUntilListening, type RunningProxy } from './proxy-process.js';

/** The shipped nginx config and the placeholders its header documents. */
export const FORWARD_AUTH_CONF = join(repoRoot, 'deploy/nginx/forward-auth.conf');
export const PLACEHOLDERS = ['__LISTEN__', '__KEYGATE__', '__UPSTREAM__'] as const;

export type RunningNginx = RunningProxy;

export function nginxAvailable(): boolean {
  const r = spawnSync('nginx', ['-V'], { encoding: 'utf8' });
  return !r.error && r.stderr.includes('--with-http_auth_request_module');
}

/** The shipped file with only its documented placeholders filled in; refuses to run if one is left. */
function fillPlaceholders(values: Record<(typeof PLACEHOLDERS)[number], string>): string {
  return fillShippedFile(FORWARD_AUTH_CONF, PLACEHOLDERS, values);
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
  return runUntilListening('nginx', ['-p', dir, '-c', file, '-e', 'stderr', '-g', 'daemon off;'], {
    port,
    dir,
    stopSignal: 'SIGQUIT',
  });
}
