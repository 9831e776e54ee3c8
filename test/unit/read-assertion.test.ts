import { describe, expect, it } from 'vitest';
import { readAssertion } from '../../src/config/read-assertion.js';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';

const ON = { KEYGATE_ASSERTION_KEYS_FILE: '/run/secrets/assertion.json', KEYGATE_ASSERTION_AUDIENCE: 'orders' };

describe('KEYGATE_ASSERTION_* settings', () => {
  it('is off without a keys file, and on with the documented defaults', () => {
    expect(readAssertion({}, [])).toBeUndefined();
    const problems: string[] = [];
    expect(readAssertion(ON, problems)).toEqual({
      keysFile: '/run/secrets/assertion.json',
      audience: 'orders',
      issuer: 'keygate',
      ttlSeconds: 60,
      mode: 'identity',
      signingKid: undefined,
    });
    expect(problems).toEqual([]);
  });

  it.each([
    [{ KEYGATE_ASSERTION_KEYS_FILE: '/k.json' }, 'KEYGATE_ASSERTION_AUDIENCE: required'],
    [
      { ...ON, KEYGATE_ASSERTION_TTL_SECONDS: '301' },
      'KEYGATE_ASSERTION_TTL_SECONDS: must be an integer between 1 and 300',
    ],
    [
      { ...ON, KEYGATE_ASSERTION_TTL_SECONDS: '0' },
      'KEYGATE_ASSERTION_TTL_SECONDS: must be an integer between 1 and 300',
    ],
    [{ ...ON, KEYGATE_ASSERTION_MODE: 'session' }, 'KEYGATE_ASSERTION_MODE: "identity" or "request"'],
    [{ ...ON, KEYGATE_ASSERTION_AUDIENCE: ' orders' }, 'KEYGATE_ASSERTION_AUDIENCE: printable ASCII'],
    [{ ...ON, KEYGATE_ASSERTION_ISSUER: 'a\u0000b' }, 'KEYGATE_ASSERTION_ISSUER: printable ASCII'],
    [{ KEYGATE_ASSERTION_AUDIENCE: 'orders' }, 'only used with KEYGATE_ASSERTION_KEYS_FILE'],
  ])('reports %o', (env, problem) => {
    const problems: string[] = [];
    readAssertion(env, problems);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(problem);
  });

  it('reports its problems beside every other setting (config validated once)', () => {
    try {
      loadConfig({
        KEYGATE_UPSTREAM: 'http://127.0.0.1:3000',
        KEYGATE_PORT: 'x',
        KEYGATE_ASSERTION_KEYS_FILE: '/k.json',
        KEYGATE_ASSERTION_MODE: 'both',
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toContain('KEYGATE_PORT');
      expect(problems).toContain('KEYGATE_ASSERTION_AUDIENCE: required');
      expect(problems).toContain('KEYGATE_ASSERTION_MODE');
    }
  });
});
