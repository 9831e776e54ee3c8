import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { ConfigError } from '../../src/files/config-error.js';
import { describeRedis, readRedisSettings } from '../../src/config/redis-settings.js';

const read = (env: Record<string, string>) => {
  const problems: string[] = [];
  const connection = readRedisSettings(env, problems);
  return { connection, problems };
};

describe('Redis settings', () => {
  const good: Array<[string, Record<string, string>, unknown]> = [
    ['nothing: embedded store', {}, undefined],
    ['one server', { KEYGATE_REDIS_URL: 'redis://:pw@r:6379/2' }, { mode: 'standalone', url: 'redis://:pw@r:6379/2' }],
    [
      'sentinels, IPv6 too',
      {
        KEYGATE_REDIS_SENTINELS: 's1:26379, 10.0.0.2:26379,[::1]:26380',
        KEYGATE_REDIS_SENTINEL_NAME: 'main',
        KEYGATE_REDIS_PASSWORD: 'pw',
      },
      {
        mode: 'sentinel',
        masterName: 'main',
        password: 'pw',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: '10.0.0.2', port: 26379 },
          { host: '::1', port: 26380 },
        ],
      },
    ],
    [
      'cluster seed nodes',
      { KEYGATE_REDIS_CLUSTER_NODES: 'redis-0.redis:6379' },
      { mode: 'cluster', nodes: [{ host: 'redis-0.redis', port: 6379 }] },
    ],
  ];
  it.each(good)('%s', (_name, env, expected) => {
    const { connection, problems } = read(env);
    expect(problems).toEqual([]);
    expect(connection).toEqual(expected);
  });

  const bad: Array<[string, Record<string, string>, string[]]> = [
    [
      'two deployments at once',
      { KEYGATE_REDIS_URL: 'redis://r', KEYGATE_REDIS_CLUSTER_NODES: 'a:1' },
      ['set only one'],
    ],
    [
      'sentinels without a master name',
      { KEYGATE_REDIS_SENTINELS: 's:26379' },
      ['KEYGATE_REDIS_SENTINEL_NAME: required'],
    ],
    [
      'a master name without sentinels',
      { KEYGATE_REDIS_SENTINEL_NAME: 'm' },
      ['only used with KEYGATE_REDIS_SENTINELS'],
    ],
    [
      'a password next to a URL',
      { KEYGATE_REDIS_URL: 'redis://r', KEYGATE_REDIS_PASSWORD: 'x' },
      ['put the password in the URL'],
    ],
    ['a password alone', { KEYGATE_REDIS_PASSWORD: 'x' }, ['only used with']],
    [
      'bad entries, each named',
      { KEYGATE_REDIS_CLUSTER_NODES: 'a:1,b,c:70000,under_score:1,:5' },
      ['"b"', '"c:70000"', '"under_score:1"', '":5"'],
    ],
    ['an empty list', { KEYGATE_REDIS_CLUSTER_NODES: ' , ' }, ['at least one']],
    [
      'a bad master name',
      { KEYGATE_REDIS_SENTINELS: 's:1', KEYGATE_REDIS_SENTINEL_NAME: 'a b' },
      ['KEYGATE_REDIS_SENTINEL_NAME: letters'],
    ],
    ['a URL that is not redis', { KEYGATE_REDIS_URL: 'http://r' }, ['redis:// or rediss://']],
  ];
  it.each(bad)('refuses %s', (_name, env, needles) => {
    const { problems } = read(env);
    for (const n of needles) expect(problems.join('\n')).toContain(n);
    if (needles.length > 1) expect(problems.length).toBeGreaterThanOrEqual(needles.length);
  });

  it.each([
    ['userinfo password', 'redis://u:s3cr3t-pw@r:1', 'redis://u:***@r:1'],
    ['?password= (ioredis reads it as the password)', 'redis://r:1/0?password=s3cr3t-pw', 'redis://r:1/0?password=***'],
    [
      '?password= next to other options',
      'rediss://r:1?db=2&password=s3cr3t-pw&family=6',
      'rediss://r:1?db=2&password=***&family=6',
    ],
    ['?sentinelPassword= in any case', 'redis://r:1?SentinelPassword=s3cr3t-pw', 'redis://r:1?SentinelPassword=***'],
    ['both forms at once', 'redis://:s3cr3t-pw@r:1?password=s3cr3t-pw', 'redis://:***@r:1?password=***'],
  ])('masks a %s', (_name, url, shown) => {
    const text = describeRedis({ mode: 'standalone', url })!;
    expect(text).toBe(shown);
    expect(text).not.toContain('s3cr3t');
  });

  it('never shows a password in the description', () => {
    expect(describeRedis({ mode: 'standalone', url: 'redis://u:secret@r:1' })).not.toContain('secret');
    expect(
      describeRedis({ mode: 'sentinel', sentinels: [{ host: 's', port: 1 }], masterName: 'm', password: 'secret' }),
    ).toBe('sentinel m via s:1');
    expect(describeRedis({ mode: 'cluster', nodes: [{ host: '::1', port: 7000 }], password: 'secret' })).toBe(
      'cluster [::1]:7000',
    );
  });
});

describe('KEYGATE_WORKERS', () => {
  const base = { KEYGATE_UPSTREAM: 'http://127.0.0.1:3000' };
  it.each([
    [{}, 1],
    [{ KEYGATE_WORKERS: '3', KEYGATE_REDIS_URL: 'redis://r' }, 3],
    [{ KEYGATE_WORKERS: 'auto', KEYGATE_REDIS_CLUSTER_NODES: 'a:1' }, availableParallelism()],
    [{ KEYGATE_WORKERS: '1' }, 1],
  ])('%j → %i workers', (env, workers) => {
    expect(loadConfig({ ...base, ...env }).workers).toBe(workers);
  });

  it('the embedded store refuses more than one worker, saying why', () => {
    expect(() => loadConfig({ ...base, KEYGATE_WORKERS: '2' })).toThrow(
      /KEYGATE_WORKERS: 2 workers need Redis .*replay guard is per process/,
    );
  });

  it.each(['0', '-1', 'many', '1.5', '257'])('refuses %j', (raw) => {
    expect(() => loadConfig({ ...base, KEYGATE_WORKERS: raw, KEYGATE_REDIS_URL: 'redis://r' })).toThrow(
      /KEYGATE_WORKERS: "auto" or an integer/,
    );
  });

  it('lists Redis and worker problems together with the others', () => {
    try {
      loadConfig({ KEYGATE_WORKERS: 'x', KEYGATE_REDIS_SENTINELS: 'nope', KEYGATE_PORT: 'p' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const text = (err as ConfigError).problems.join('\n');
      for (const n of [
        'KEYGATE_UPSTREAM',
        'KEYGATE_PORT',
        'KEYGATE_WORKERS',
        'KEYGATE_REDIS_SENTINELS',
        'KEYGATE_REDIS_SENTINEL_NAME',
      ])
        expect(text).toContain(n);
    }
  });
});
