import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './deploy.js';
import { freePort } from './free-port.js';
import { fillShippedFile, runUntilListening, type RunningProxy } from './proxy-process.js';

/** The shipped Caddy recipe and the placeholders its header documents. */
export const CADDYFILE = join(repoRoot, 'deploy/caddy/Caddyfile');
export const CADDY_PLACEHOLDERS = ['__SITE__', '__KEYGATE__', '__UPSTREAM__'] as const;

export type RunningCaddy = RunningProxy;

/** The version Caddy reports (`caddy version`), or undefined when it is not on PATH. */
export function caddyVersion(): string | undefined {
  const r = spawnSync('caddy', ['version'], { encoding: 'utf8' });
  return r.error || r.status !== 0 ? undefined : r.stdout.trim();
}

/** The shipped file with only its documented placeholders filled in; refuses to run if one is left. */
export function fillCaddyfile(values: Record<(typeof CADDY_PLACEHOLDERS)[number], string>): string {
  return fillShippedFile(CADDYFILE, CADDY_PLACEHOLDERS, values);
}

/**
 * Runs deploy/caddy/Caddyfile exactly as shipped (placeholders filled) in the foreground:
 * `caddy run --config <dir>/Caddyfile --adapter caddyfile`, with Caddy's data and config
 * directories in a throwaway dir. Fails loudly, never skips, when caddy is missing.
 */
export async function startCaddy(keygate: string, upstream: string): Promise<RunningCaddy> {
  if (caddyVersion() === undefined)
    throw new Error('caddy is not on PATH: apt-get install -y caddy (Debian; .ci/run installs it)');
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-caddy-'));
  chmodSync(dir, 0o755);
  const file = join(dir, 'Caddyfile');
  writeFileSync(
    file,
    fillCaddyfile({
      __SITE__: `http://127.0.0.1:${port}`,
      __KEYGATE__: new URL(keygate).host,
      __UPSTREAM__: new URL(upstream).host,
    }),
  );
  return runUntilListening('caddy', ['run', '--config', file, '--adapter', 'caddyfile'], {
    port,
    dir,
    stopSignal: 'SIGTERM',
    env: { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
  });
}
