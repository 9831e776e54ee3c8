import { execFileSync, spawnSync } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  constants,
  existsSync,
  mkdtempSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
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

  /**
   * promtool is optional: as root with apt-get at hand, the script installs what the suite needs, but the
   * `prometheus` package (a dozen Debian packages and a service) only when asked, and otherwise says what promtool
   * adds and how to install it. Every tool is a stand-in that records how it was called.
   */
  describe('promtool (optional)', () => {
    function run(env: Record<string, string>): { calls: string; stdout: string } {
      const bin = mkdtempSync(join(tmpdir(), 'keygate-test-all-'));
      const calls = join(bin, 'calls.log');
      for (const tool of ['bash', 'dirname'])
        symlinkSync(execFileSync('which', [tool], { encoding: 'utf8' }).trim(), join(bin, tool));
      const standIn = (name: string, body = '') => {
        writeFileSync(join(bin, name), `#!/bin/sh\necho "${name} $*" >> '${calls}'\n${body}exit 0\n`);
        chmodSync(join(bin, name), 0o755);
      };
      standIn('id', 'echo 0\n');
      for (const tool of ['apt-get', 'redis-server', 'redis-cli', 'wrk', 'git', 'python3', 'nginx', 'caddy', 'kubectl'])
        standIn(tool);
      standIn('npm');
      const r = spawnSync(join(bin, 'bash'), ['scripts/test-all.sh'], {
        encoding: 'utf8',
        env: { PATH: bin, HOME: bin, ...env },
      });
      expect(r.status, r.stderr).toBe(0);
      return { calls: existsSync(calls) ? readFileSync(calls, 'utf8') : '', stdout: r.stdout };
    }

    it('is not installed unasked; the script says what it adds and how to install it', () => {
      const { calls, stdout } = run({});
      expect(calls).not.toMatch(/apt-get .*prometheus/);
      expect(calls).toMatch(/^npm test/m);
      expect(stdout).toContain('promtool is not installed');
      expect(stdout).toContain('apt-get install -y --no-install-recommends prometheus');
      expect(stdout).toContain('KEYGATE_TEST_ALL_PROMTOOL=1 npm run test:all');
    });

    it('is installed when asked (KEYGATE_TEST_ALL_PROMTOOL=1, as .ci/run does)', () => {
      const { calls } = run({ KEYGATE_TEST_ALL_PROMTOOL: '1' });
      expect(calls).toMatch(/^apt-get install -y -qq --no-install-recommends prometheus$/m);
      expect(readFileSync('.ci/run', 'utf8')).toMatch(/^export KEYGATE_TEST_ALL_PROMTOOL=1$/m);
    });
  });
});
