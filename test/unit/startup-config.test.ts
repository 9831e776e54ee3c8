import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadStartupConfig } from '../../src/cli/serve/startup-config.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-serve-'));
const keysFile = (name: string, text: string) => {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
};
const SECRET = 'never-shown-secret-0123456789';

describe('loadStartupConfig', () => {
  it.each<[string, Record<string, string>, string[] | undefined]>([
    [
      'a keys file: its records, read once, for serve to use',
      {
        KEYGATE_KEYS_FILE: keysFile(
          'k.yaml',
          `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}\n  - apiKey: b\n    apiSecret: ${SECRET}\n`,
        ),
      },
      ['a', 'b'],
    ],
    ['no keys file: no records', {}, undefined],
    [
      'Redis mode: the keys file is not read',
      { KEYGATE_KEYS_FILE: join(dir, 'missing.yaml'), KEYGATE_REDIS_URL: 'redis://127.0.0.1:6379' },
      undefined,
    ],
  ])('%s', (_name, env, apiKeys) => {
    const { config, keys, problems } = loadStartupConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', ...env });
    expect(problems).toEqual([]);
    expect(config).toBeDefined();
    expect(keys?.map((r) => r.apiKey)).toEqual(apiKeys);
  });

  it('a broken keys file: every problem, no records, no secret', () => {
    const file = keysFile(
      'bad.yaml',
      `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}\n  - apiKey: a\n    apiSecret: short\n`,
    );
    const { config, keys, problems } = loadStartupConfig({
      KEYGATE_UPSTREAM: 'http://127.0.0.1:3000',
      KEYGATE_KEYS_FILE: file,
    });
    expect(config).toBeUndefined();
    expect(keys).toBeUndefined();
    expect(problems).toEqual([`KEYGATE_KEYS_FILE: ${file}: keys[1].apiSecret: must be at least 16 bytes`]);
    expect(problems.join('\n')).not.toContain(SECRET);
  });
});
