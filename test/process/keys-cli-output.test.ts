import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { KEYGATE_BIN, runKeygate } from '../../scripts/harness/spawn-keygate.mjs';

/**
 * Issue 41 items 4 and 5, through the real CLI on a real Redis: a 1,000-key import used to print 1,001
 * lines (an audit line per key on stderr); an export made without --with-secrets, imported, printed
 * `keys[i].apiSecret: required` for every key and never said why.
 */
const N = 1_000;
const outcome = (args: string[], env: Record<string, string>) =>
  runKeygate(args, env).then(
    (r) => ({ code: 0, ...r }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

describe('keygate keys: quiet and helpful on long work (real CLI, real Redis)', () => {
  let redis: TestRedis;
  let env: Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), 'keygate-cli-output-'));
  const file = (name: string, prefix: string) => {
    const keys = Array.from({ length: N }, (_, i) => ({
      apiKey: `${prefix}-${String(i).padStart(4, '0')}`,
      apiSecret: `${prefix}-secret-${i}-0123456789abcdef`,
    }));
    const path = join(dir, name);
    writeFileSync(path, JSON.stringify({ keys }));
    return path;
  };

  beforeAll(async () => {
    redis = await startRedis();
    env = { KEYGATE_REDIS_URL: redis.url, KEYGATE_ACTOR: 'cli-output' };
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('a 1,000-key import prints its one-line summary and no audit lines; --verbose shows them', async () => {
    const quiet = await outcome(['keys', 'import', file('quiet.json', 'q')], env);
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stdout).toBe(`imported ${N} new, replaced 0, skipped 0 existing (use --replace to overwrite)\n`);
    // Piped: no progress either; only the one warning that the secrets were stored in plain form.
    expect(quiet.stderr).toBe(
      `warning: ${N} secrets were stored unencrypted: set KEYGATE_SECRET_ENCRYPTION_KEY (or _FILE) to seal secrets at rest (docs/security.md)\n`,
    );

    const verbose = await outcome(['keys', 'import', file('verbose.json', 'v'), '--verbose'], env);
    expect(verbose.code, verbose.stderr).toBe(0);
    const audit = verbose.stderr
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('warning: '))
      .map((l) => (JSON.parse(l) as { audit: { action: string; actor: string } }).audit);
    expect(audit).toHaveLength(N);
    expect(new Set(audit.map((a) => `${a.action} ${a.actor}`))).toEqual(new Set(['import cli-output']));
  });

  it('on a terminal: progress on stderr, never in the --json output', async () => {
    const out = join(dir, 'import.json');
    const command = `${JSON.stringify(process.execPath)} ${JSON.stringify(KEYGATE_BIN)} keys import ${JSON.stringify(file('tty.json', 't'))} --json > ${JSON.stringify(out)}`;
    // script(1) runs the command on a pseudo-terminal: its stderr is a TTY, its stdout the file.
    const { stdout: terminal } = await promisify(execFile)('script', ['-qec', command, '/dev/null'], {
      env: { ...process.env, ...env },
    });
    expect(terminal).toMatch(new RegExp(String.raw`\r\u001b\[2Kimporting [\d,]+ of 1,000 \(\d+%\)`));
    expect(terminal.endsWith('\r\x1b[2K')).toBe(true); // the line is cleared at the end
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual({
      total: N,
      created: N,
      replaced: 0,
      skipped: 0,
      complete: true,
    });
  });

  it('an export without --with-secrets, imported: one line naming --with-secrets, nothing written', async () => {
    const exported = join(dir, 'export.yaml');
    const exportRun = await outcome(['keys', 'export', '--out', exported], env);
    expect(exportRun.code, exportRun.stderr).toBe(0);
    expect(exportRun.stderr).toBe(`exported ${3 * N} keys to ${exported} without secrets (not importable)\n`);

    await redis.flush();
    const imported = await outcome(['keys', 'import', exported], env);
    expect(imported.code).toBe(2);
    expect(imported.stdout).toBe('');
    expect(imported.stderr).toBe(
      `keygate keys import: nothing imported: ${exported}: apiSecret missing in 3,000 of 3,000 keys: ` +
        'this looks like an export without --with-secrets (keygate keys export --with-secrets writes a file that imports)\n',
    );
    const list = await outcome(['keys', 'list', '--json'], env);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });
});
