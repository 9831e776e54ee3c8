import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type Config } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';
import { createSecretCipher } from '../../src/keys/secret-cipher.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate } from '../helpers/spawn-keygate.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-secret-files-'));
let n = 0;
/** A secret file as Docker and Kubernetes mount them, with the trailing newline `echo` adds. */
const secretFile = (content: string) => {
  const path = join(dir, `secret-${n++}`);
  writeFileSync(path, content, { mode: 0o400 });
  return path;
};
const UPSTREAM = { KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' };
const problemsOf = (env: Record<string, string>): string[] => {
  try {
    loadConfig({ ...UPSTREAM, ...env });
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return [...err.problems];
  }
};

describe('secrets from files (_FILE variables)', () => {
  const key = randomBytes(32).toString('base64');
  const previous = randomBytes(32).toString('hex');
  // Config holds the key bytes; the cipher is built from them as createKeygate does.
  const cipherOf = (c: Config) => createSecretCipher(c.secretEncryptionKeys!);
  const sealedWith = (c: Config) => cipherOf(c).seal('the-api-secret', 'aad');

  it.each<[string, Record<string, string>, (c: Config) => unknown, unknown]>([
    [
      'KEYGATE_REDIS_URL_FILE',
      { KEYGATE_REDIS_URL_FILE: secretFile('redis://:pw-from-file@r:6379\n') },
      (c) => c.redis,
      { mode: 'standalone', url: 'redis://:pw-from-file@r:6379' },
    ],
    [
      'KEYGATE_REDIS_PASSWORD_FILE',
      {
        KEYGATE_REDIS_SENTINELS: 's:26379',
        KEYGATE_REDIS_SENTINEL_NAME: 'm',
        KEYGATE_REDIS_PASSWORD_FILE: secretFile('pw-from-file\r\n'),
      },
      (c) => c.redis,
      { mode: 'sentinel', sentinels: [{ host: 's', port: 26379 }], masterName: 'm', password: 'pw-from-file' },
    ],
    [
      'KEYGATE_SECRET_ENCRYPTION_KEY_FILE',
      { KEYGATE_SECRET_ENCRYPTION_KEY_FILE: secretFile(`${key}\n`) },
      // Sealed with the file's key, opened by a config that has the same key inline.
      (c) => cipherOf(loadConfig({ ...UPSTREAM, KEYGATE_SECRET_ENCRYPTION_KEY: key })).open(sealedWith(c), 'aad'),
      'the-api-secret',
    ],
    [
      'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS_FILE',
      { KEYGATE_SECRET_ENCRYPTION_KEY: key, KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS_FILE: secretFile(previous) },
      (c) =>
        cipherOf(c).open(
          cipherOf(loadConfig({ ...UPSTREAM, KEYGATE_SECRET_ENCRYPTION_KEY: previous })).seal('old', 'aad'),
          'aad',
        ),
      'old',
    ],
  ])('%s is read like the variable itself', (_name, env, pick, expected) => {
    expect(pick(loadConfig({ ...UPSTREAM, ...env }))).toEqual(expected);
  });

  it.each<[string, Record<string, string>, RegExp]>([
    [
      'both forms set',
      { KEYGATE_REDIS_URL: 'redis://r', KEYGATE_REDIS_URL_FILE: secretFile('redis://r2') },
      /^KEYGATE_REDIS_URL, KEYGATE_REDIS_URL_FILE: set only one of them$/,
    ],
    [
      'both forms of the encryption key',
      { KEYGATE_SECRET_ENCRYPTION_KEY: key, KEYGATE_SECRET_ENCRYPTION_KEY_FILE: secretFile(key) },
      /^KEYGATE_SECRET_ENCRYPTION_KEY, KEYGATE_SECRET_ENCRYPTION_KEY_FILE: set only one/,
    ],
    [
      'a missing file',
      { KEYGATE_REDIS_PASSWORD_FILE: join(dir, 'nope'), KEYGATE_REDIS_CLUSTER_NODES: 'n:7000' },
      /^KEYGATE_REDIS_PASSWORD_FILE: cannot read .*nope: ENOENT$/,
    ],
    [
      'an empty file',
      { KEYGATE_SECRET_ENCRYPTION_KEY_FILE: secretFile('\n') },
      /^KEYGATE_SECRET_ENCRYPTION_KEY_FILE: .* is empty$/,
    ],
    [
      'a bad key in the file, named by the variable',
      { KEYGATE_SECRET_ENCRYPTION_KEY_FILE: secretFile('not-a-key-s3cr3t\n') },
      /^KEYGATE_SECRET_ENCRYPTION_KEY: must be 32 random bytes/,
    ],
  ])('refuses %s', (_name, env, problem) => {
    const problems = problemsOf(env);
    expect(
      problems.some((p) => problem.test(p)),
      problems.join('\n'),
    ).toBe(true);
    // A problem never quotes what the file holds.
    expect(problems.join('\n')).not.toMatch(/s3cr3t|redis:\/\/r2/);
  });

  describe('the keys CLI reads them too', () => {
    let redis: TestRedis;
    beforeAll(async () => {
      redis = await startRedis({ shared: true });
    });
    afterAll(() => redis.stop());

    it('keys create and show with KEYGATE_REDIS_URL_FILE and KEYGATE_SECRET_ENCRYPTION_KEY_FILE', async () => {
      const env = {
        KEYGATE_REDIS_URL: '',
        KEYGATE_REDIS_URL_FILE: secretFile(`${redis.url}\n`),
        KEYGATE_SECRET_ENCRYPTION_KEY_FILE: secretFile(`${key}\n`),
      };
      const created = JSON.parse((await runKeygate(['keys', 'create', '--json'], env)).stdout) as { apiKey: string };
      const shown = JSON.parse((await runKeygate(['keys', 'show', created.apiKey], env)).stdout) as { apiKey: string };
      expect(shown.apiKey).toBe(created.apiKey);
      // Sealed at rest with the key from the file.
      const raw = await promisify(execFile)('redis-cli', [
        '-u',
        redis.url,
        'HGET',
        `keygate:{keystore}:key:${created.apiKey}`,
        'json',
      ]);
      expect(raw.stdout).toMatch(/"encSecret":"kg1\./);
    });
  });
});
