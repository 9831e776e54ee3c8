import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runManagementTokenCommand } from '../../src/cli/credentials/management-token-command.js';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';
import {
  loadManagementTokens,
  ManagementTokensError,
  matchToken,
  sha256Hex,
} from '../../src/config/management-tokens.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-mgmt-tokens-'));
const file = (name: string, text: string) => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};
const HASH = sha256Hex('kgm_example');

describe('management tokens file', () => {
  it('loads name, sha256 and access; a token matches only in full', () => {
    const tokens = loadManagementTokens(
      file(
        'ok.yaml',
        `tokens:\n  - { name: settings-backend, sha256: ${HASH}, access: write }\n  - { name: auditor, sha256: ${sha256Hex('kgm_other')}, access: read }\n`,
      ),
    );
    expect(tokens.map((t) => [t.name, t.access])).toEqual([
      ['settings-backend', 'write'],
      ['auditor', 'read'],
    ]);
    expect(matchToken(tokens, 'kgm_example')?.name).toBe('settings-backend');
    expect(matchToken(tokens, 'kgm_other')?.name).toBe('auditor');
    for (const wrong of ['kgm_exampl', 'kgm_examplf', 'kgm_example ', '', HASH])
      expect(matchToken(tokens, wrong)).toBeUndefined();
  });

  it('lists every problem at once', () => {
    const p = file(
      'bad.yaml',
      `tokens:\n  - { name: "has space", sha256: ${HASH.toUpperCase()}, access: admin }\n  - { name: ok, sha256: ${HASH}, access: read, extra: 1 }\n  - { name: ok, sha256: ${HASH}, access: read }\n`,
    );
    let problems: readonly string[] = [];
    try {
      loadManagementTokens(p);
    } catch (err) {
      expect(err).toBeInstanceOf(ManagementTokensError);
      problems = (err as ManagementTokensError).problems;
    }
    expect(problems).toEqual([
      `${p}: tokens[0].name: only A-Z a-z 0-9 _ . @ - allowed, 1 to 64 chars`,
      `${p}: tokens[0].sha256: 64 lower-case hex digits (the SHA-256 of the token)`,
      `${p}: tokens[0].access: must be one of "read", "write"`,
      `${p}: tokens[2].name: duplicate name "ok"`,
      `${p}: tokens[2].sha256: the same token is listed twice`,
      `${p}: tokens[1].extra: unknown setting (not in the schema; a typo?)`,
    ]);
  });

  it.each([
    [
      'a port without a tokens file',
      { KEYGATE_MANAGEMENT_PORT: '9091' },
      /KEYGATE_MANAGEMENT_TOKENS_FILE: required with KEYGATE_MANAGEMENT_PORT/,
    ],
    ['a tokens file without a port', { KEYGATE_MANAGEMENT_TOKENS_FILE: '/nowhere' }, /KEYGATE_MANAGEMENT_PORT is not/],
    [
      'the admin port',
      { KEYGATE_MANAGEMENT_PORT: '9090', KEYGATE_MANAGEMENT_TOKENS_FILE: join(dir, 'ok.yaml') },
      /must differ from KEYGATE_PORT and KEYGATE_ADMIN_PORT/,
    ],
    [
      'a broken tokens file',
      { KEYGATE_MANAGEMENT_PORT: '9091', KEYGATE_MANAGEMENT_TOKENS_FILE: join(dir, 'bad.yaml') },
      /KEYGATE_MANAGEMENT_TOKENS_FILE: .*tokens\[0\]\.name/,
    ],
    [
      'a missing tokens file',
      { KEYGATE_MANAGEMENT_PORT: '9091', KEYGATE_MANAGEMENT_TOKENS_FILE: join(dir, 'missing.yaml') },
      /KEYGATE_MANAGEMENT_TOKENS_FILE: .*ENOENT/,
    ],
  ])('refuses to start with %s', (_name, env, problem) => {
    expect(() => loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', ...env })).toThrow(ConfigError);
    try {
      loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', ...env });
    } catch (err) {
      expect(
        (err as ConfigError).problems.some((p) => problem.test(p)),
        JSON.stringify((err as ConfigError).problems),
      ).toBe(true);
    }
  });

  it('defaults to loopback; no port, no listener', () => {
    const on = loadConfig({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:3000',
      KEYGATE_MANAGEMENT_PORT: '9091',
      KEYGATE_MANAGEMENT_TOKENS_FILE: join(dir, 'ok.yaml'),
    });
    expect(on.management).toEqual({ host: '127.0.0.1', port: 9091, tokensFile: join(dir, 'ok.yaml') });
    expect(loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' }).management).toBeUndefined();
  });

  it('keygate management-token prints a 256-bit token once and the line whose sha256 matches it', () => {
    let text = '';
    const out = new Writable({ write: (c, _e, cb) => ((text += String(c)), cb()) });
    expect(runManagementTokenCommand(['--name', 'settings-backend', '--access', 'write'], out)).toBe(0);
    const token = /^\s+(kgm_[A-Za-z0-9_-]+)$/m.exec(text)?.[1] as string;
    expect(Buffer.from(token.slice(4), 'base64url')).toHaveLength(32);
    const line = /- \{ name: settings-backend, sha256: ([0-9a-f]{64}), access: write \}/.exec(text);
    expect(line?.[1]).toBe(sha256Hex(token));
    const tokens = loadManagementTokens(
      file(
        'made.yaml',
        `tokens:\n${text
          .split('\n')
          .filter((l) => l.includes('sha256'))
          .join('\n')}\n`,
      ),
    );
    expect(matchToken(tokens, token)?.access).toBe('write');
    const err = new Writable({ write: (_c, _e, cb) => cb() });
    expect(runManagementTokenCommand(['--name', 'x y', '--access', 'admin'], out, err)).toBe(2);
  });
});
