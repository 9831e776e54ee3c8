import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readDoc, section } from '../helpers/markdown.js';

/**
 * scripts/test-all.sh is the README's one test command, and .ci/run calls exactly it. These checks keep the three in
 * step: the command the README shows, the script package.json names, the line CI runs, and the tools the suite's
 * helpers ask for. (That the script takes a fresh Debian root to a green run was shown by hand in a minimal
 * mmdebstrap root: issue 35 item 17.)
 */
const script = readFileSync('scripts/test-all.sh', 'utf8');
const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;

describe('the README test command (npm run test:all)', () => {
  it('is the one command in the README Tests section, the script package.json names, and what .ci/run runs', () => {
    const tests = section(readDoc('README.md'), 'Tests');
    const blocks = [...tests.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
    expect(blocks).toEqual(['npm run test:all']);
    expect(scripts['test:all']).toBe('scripts/test-all.sh');
    const ciLines = readFileSync('.ci/run', 'utf8')
      .split('\n')
      .filter((l) => /^\s*npm (test|run test:all)\b/.test(l));
    expect(ciLines).toEqual(['npm run test:all']);
  });

  it('is an executable bash script that parses', () => {
    accessSync('scripts/test-all.sh', constants.X_OK);
    expect(() => execFileSync('bash', ['-n', 'scripts/test-all.sh'])).not.toThrow();
  });

  // Every Debian package the suite's helpers tell a newcomer to install is one the script installs.
  it.each([
    ['redis-server', 'redis-server and redis-cli (test/helpers/redis-server.ts)'],
    ['wrk', 'the benchmark harness'],
    ['git', 'the A/B harness'],
    ['python3-jwt', "the README's Python example"],
    ['nginx', 'the nginx forward-auth recipe'],
    ['caddy', 'the Caddy forward-auth recipe'],
    ['libnginx-mod-http-lua', "the benchmark's nginx+lua peer"],
    ['lua-resty-core', "the benchmark's nginx+lua peer"],
    ['lua-cjson', "the benchmark's nginx+lua peer"],
    ['chromium', 'the console test'],
    ['prometheus', 'promtool (optional)'],
  ])('installs %s (%s) when missing', (pkg) => {
    expect(script).toMatch(new RegExp(`\\+=\\((?:[\\w-]+ )*${pkg}(?: [\\w-]+)*\\)`));
  });

  it('names what is missing and stops, installing nothing, when it may not install', () => {
    // A PATH with only what the script itself runs on: the tools looked up on PATH are all missing.
    const bin = mkdtempSync(join(tmpdir(), 'keygate-test-all-'));
    for (const tool of ['bash', 'dirname', 'id'])
      symlinkSync(execFileSync('which', [tool], { encoding: 'utf8' }).trim(), join(bin, tool));
    const r = spawnSync(join(bin, 'bash'), ['scripts/test-all.sh'], {
      encoding: 'utf8',
      env: { PATH: bin, KEYGATE_TEST_ALL_NO_INSTALL: '1', HOME: bin },
    });
    expect(r.status, r.stderr).toBe(1);
    const needs = /ERROR: the suite needs: (.*)/.exec(r.stderr)?.[1]?.split(' ');
    expect(needs).toEqual(expect.arrayContaining(['redis-server', 'wrk', 'git', 'nginx', 'caddy']));
    expect(r.stderr).toContain(`apt-get install -y ${needs?.join(' ')}`);
    expect(r.stdout).not.toContain('installing');
  });
});
