import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadSecretEncryptionKeys } from '../../src/config/secret-encryption.js';

describe('loadSecretEncryptionKeys', () => {
  const hex = randomBytes(32).toString('hex');
  const b64 = randomBytes(32).toString('base64');

  it.each([
    ['64 hex characters', { KEYGATE_SECRET_ENCRYPTION_KEY: hex }, 0],
    ['base64', { KEYGATE_SECRET_ENCRYPTION_KEY: b64 }, 0],
    ['with a previous key', { KEYGATE_SECRET_ENCRYPTION_KEY: hex, KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS: b64 }, 1],
  ])('reads the key as bytes: %s', (_name, env, previous) => {
    const problems: string[] = [];
    const keys = loadSecretEncryptionKeys(env, problems);
    expect(problems).toEqual([]);
    expect(keys?.current).toHaveLength(32);
    expect(keys?.previous).toHaveLength(previous);
  });

  it.each([
    ['too short', { KEYGATE_SECRET_ENCRYPTION_KEY: 'abcd' }, 'KEYGATE_SECRET_ENCRYPTION_KEY: must be 32 random bytes'],
    ['previous without current', { KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS: hex }, 'set only together with'],
  ])('reports a problem: %s', (_name, env, problem) => {
    const problems: string[] = [];
    expect(loadSecretEncryptionKeys(env, problems)).toBeUndefined();
    expect(problems.join('\n')).toContain(problem);
  });

  it('never serialises the key bytes (the config holds them as plain data)', () => {
    const keys = loadSecretEncryptionKeys(
      { KEYGATE_SECRET_ENCRYPTION_KEY: hex, KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS: b64 },
      [],
    );
    const dumped = JSON.stringify({ config: { secretEncryptionKeys: keys } });
    expect(dumped).toBe('{"config":{"secretEncryptionKeys":"[redacted]"}}');
    expect(dumped).not.toContain(hex);
  });
});
