import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/config/management-tokens.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate, serveKeygate, spawnKeygate } from '../helpers/spawn-keygate.js';

/**
 * Issue 35 item 6: a syntax error in a keys file printed the parser's code frame (the bad line and the
 * one before it, secrets included) to the log and the terminal. Each broken file below has secrets on
 * the lines around its error; every path that reads such a file must name line and column, and no
 * byte of any secret may appear in its stdout, stderr or log.
 */
const SECRETS = ['planted-secret-ONE-0123456789', 'planted-secret-TWO-0123456789', 'planted-secret-THREE-012345'];
const HASHES = SECRETS.map(sha256Hex);

const GOOD_KEYS = `keys:\n  - { apiKey: k1, apiSecret: good-secret-0123456789abc, id: k1 }\n`;
const GOOD_KEYS_JSON = JSON.stringify({ keys: [{ apiKey: 'k1', apiSecret: 'good-secret-0123456789abc', id: 'k1' }] });
const GOOD_TOKENS = `tokens:\n  - { name: ops, sha256: "${sha256Hex('ops-token')}", access: read }\n`;

/** Broken files with the line and column the report must give. */
const BROKEN_KEYS = [
  {
    name: 'YAML flow entry missing its }',
    ext: 'yaml',
    text: `keys:\n  - { apiKey: a1, apiSecret: ${SECRETS[0]}, id: a1 }\n  - { apiKey: a2, apiSecret: ${SECRETS[1]}, id: a2\n  - { apiKey: a3, apiSecret: ${SECRETS[2]}, id: a3 }\n`,
    at: 'line 4, column 3',
  },
  {
    name: 'YAML unterminated quote',
    ext: 'yaml',
    text: `keys:\n  - apiKey: a1\n    apiSecret: "${SECRETS[0]}\n    id: a1\n  - apiKey: a2\n    apiSecret: ${SECRETS[1]}\n`,
    // The quote runs to the end of the file, where YAML finds it unclosed.
    at: 'line 7, column 1',
  },
  {
    name: 'JSON with a stray token',
    ext: 'json',
    text: `{"keys": [\n  {"apiKey": "a1", "apiSecret": "${SECRETS[0]}", "id": "a1"},\n  {"apiKey": "a2", "apiSecret": "${SECRETS[1]}" "id": "a2"}\n]}\n`,
    at: 'line 3, column',
  },
  {
    name: 'JSON that is not JSON at all',
    ext: 'json',
    text: `${SECRETS[0]} ${SECRETS[1]}\n`,
    at: 'not valid JSON',
  },
];
const BROKEN_TOKENS = {
  name: 'tokens file, YAML flow entry missing its }',
  ext: 'yaml',
  text: `tokens:\n  - { name: a, sha256: "${HASHES[0]}", access: read }\n  - { name: b, sha256: "${HASHES[1]}", access: write\n  - { name: c, sha256: "${HASHES[2]}", access: read }\n`,
  at: 'line 4, column 3',
};

function expectNoSecret(output: string) {
  for (const s of [...SECRETS, ...HASHES]) expect(output, 'a planted secret was printed').not.toContain(s);
  // Not even a fragment: the longest distinctive part of each.
  expect(output).not.toMatch(/planted-secret/);
}

const dir = mkdtempSync(join(tmpdir(), 'keygate-parse-'));
let n = 0;
const file = (ext: string, text: string) => {
  const path = join(dir, `f${n++}.${ext}`);
  writeFileSync(path, text);
  return path;
};
type Failure = { code: number; stdout: string; stderr: string };
const failure = (run: Promise<unknown>) =>
  run.then(
    () => undefined,
    (err: Failure) => err,
  );

describe('parse errors in keys and tokens files name line and column, never the text (real CLI process)', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis({ shared: true });
  });
  afterAll(async () => {
    await redis?.stop();
  });

  describe.each(BROKEN_KEYS)('keys file: $name', ({ ext, text, at }) => {
    it('check-config', async () => {
      const r = await failure(
        runKeygate(['check-config'], {
          KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
          KEYGATE_REDIS_URL: undefined,
          KEYGATE_KEYS_FILE: file(ext, text),
        }),
      );
      expect(r?.code).toBe(1);
      expect(r?.stderr).toContain(at);
      expectNoSecret(`${r?.stdout}${r?.stderr}`);
    });
    it('keys import', async () => {
      const r = await failure(runKeygate(['keys', 'import', file(ext, text)], { KEYGATE_REDIS_URL: redis.url }));
      expect(r?.code).toBeGreaterThan(0);
      expect(r?.stderr).toContain(at);
      expectNoSecret(`${r?.stdout}${r?.stderr}`);
    });
    it('a failed start', async () => {
      const p = spawnKeygate(['serve'], {
        env: {
          KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
          KEYGATE_REDIS_URL: '',
          KEYGATE_PORT: '0',
          KEYGATE_ADMIN_PORT: '0',
          KEYGATE_KEYS_FILE: file(ext, text),
        },
      });
      expect((await p.exited).code).toBe(1);
      expect(p.stderr()).toContain(at);
      expectNoSecret(p.output());
    });
  });

  it.each([
    ...BROKEN_KEYS.map((b) => ({ ...b, what: 'keys' as const })),
    { ...BROKEN_TOKENS, what: 'tokens' as const },
  ])(
    'a running Keygate: the watcher and SIGHUP both reject $name ($what) without its text',
    async ({ ext, text, at, what }) => {
      const keysFile = file(ext, ext === 'json' && what === 'keys' ? GOOD_KEYS_JSON : GOOD_KEYS);
      const tokensFile = file(BROKEN_TOKENS.ext, GOOD_TOKENS);
      const s = await serveKeygate({
        KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
        KEYGATE_KEYS_FILE: keysFile,
        KEYGATE_MANAGEMENT_PORT: '0',
        KEYGATE_MANAGEMENT_TOKENS_FILE: tokensFile,
      });
      try {
        await s.line('keygate started');
        const target = what === 'keys' ? keysFile : tokensFile;
        const rejected = (cause: (c: string) => boolean) => (l: Record<string, unknown>) =>
          String(l.msg).includes('rejected') && l.file === target && cause(String(l.cause));
        writeFileSync(target, text);
        const watched = await s.line(rejected((c) => c !== 'reload requested'));
        s.child.kill('SIGHUP');
        const hupped = await s.line(rejected((c) => c === 'reload requested'));
        for (const line of [watched, hupped]) expect(JSON.stringify(line.problems)).toContain(at);
        // Item 8: SIGHUP's own line names every file it re-read (it used to say "only the policy file").
        expect((await s.line((l) => String(l.msg).startsWith('SIGHUP:'))).msg).toBe(
          'SIGHUP: reloaded the policy file, management tokens file, keys file',
        );
        expectNoSecret(s.output());
      } finally {
        await s.stop();
      }
    },
  );

  it('a YAML warning (unknown tag) beside a secret prints nothing to stderr', async () => {
    const r = await runKeygate(['check-config'], {
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_REDIS_URL: undefined,
      KEYGATE_KEYS_FILE: file('yaml', `keys:\n  - { apiKey: a1, apiSecret: !odd ${SECRETS[0]}, id: a1 }\n`),
    });
    expect(r.stdout).toContain('configuration is valid');
    expectNoSecret(`${r.stdout}${r.stderr}`);
  });
});
