import { describe, expect, it } from 'vitest';
import { readRedisDurability, readReplayFence } from '../../src/config/read-durability.js';
import type { RedisConnection } from '../../src/config/redis-settings.js';

const ONE: RedisConnection = { mode: 'standalone', url: 'redis://r:6379' };
const SENTINEL: RedisConnection = { mode: 'sentinel', sentinels: [{ host: 's', port: 26379 }], masterName: 'm' };
const NO_RISK = { allowEvictingRedis: false, allowVolatileKeyChanges: false };
const CLUSTER: RedisConnection = { mode: 'cluster', nodes: [{ host: 'c', port: 7000 }] };

describe('readRedisDurability', () => {
  const cases: Array<[string, Record<string, string>, RedisConnection | undefined, unknown, string[]]> = [
    ['one server: does not wait by default', {}, ONE, { minReplicas: 0, timeoutMs: 1_000, ...NO_RISK }, []],
    ['Sentinel: one replica by default', {}, SENTINEL, { minReplicas: 1, timeoutMs: 1_000, ...NO_RISK }, []],
    ['Cluster: one replica by default', {}, CLUSTER, { minReplicas: 1, timeoutMs: 1_000, ...NO_RISK }, []],
    [
      'set explicitly',
      { KEYGATE_REDIS_MIN_REPLICAS: '2', KEYGATE_REDIS_DURABILITY_TIMEOUT_MS: '250' },
      ONE,
      { minReplicas: 2, timeoutMs: 250, ...NO_RISK },
      [],
    ],
    [
      '0 under Sentinel: the old behaviour, on request',
      { KEYGATE_REDIS_MIN_REPLICAS: '0' },
      SENTINEL,
      { minReplicas: 0, timeoutMs: 1_000, ...NO_RISK },
      [],
    ],
    [
      'out of range',
      { KEYGATE_REDIS_MIN_REPLICAS: '17' },
      CLUSTER,
      { minReplicas: 1, timeoutMs: 1_000, ...NO_RISK },
      ['KEYGATE_REDIS_MIN_REPLICAS: must be an integer between 0 and 16'],
    ],
    [
      'not a number',
      { KEYGATE_REDIS_DURABILITY_TIMEOUT_MS: 'soon' },
      ONE,
      { minReplicas: 0, timeoutMs: 1_000, ...NO_RISK },
      ['KEYGATE_REDIS_DURABILITY_TIMEOUT_MS: must be an integer'],
    ],
    [
      'the risks accepted in words',
      { KEYGATE_ALLOW_EVICTING_REDIS: 'true', KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true' },
      ONE,
      { minReplicas: 0, timeoutMs: 1_000, allowEvictingRedis: true, allowVolatileKeyChanges: true },
      [],
    ],
    [
      'a risk flag that is not true or false',
      { KEYGATE_ALLOW_EVICTING_REDIS: 'yes' },
      ONE,
      { minReplicas: 0, timeoutMs: 1_000, ...NO_RISK },
      ['KEYGATE_ALLOW_EVICTING_REDIS: "true" or "false"'],
    ],
    [
      'a risk flag without Redis',
      { KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true' },
      undefined,
      undefined,
      ['KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: only used with Redis'],
    ],
    [
      'without Redis',
      { KEYGATE_REDIS_MIN_REPLICAS: '1' },
      undefined,
      undefined,
      ['KEYGATE_REDIS_MIN_REPLICAS: only used with Redis'],
    ],
  ];
  it.each(cases)('%s', (_name, env, redis, expected, problemStarts) => {
    const problems: string[] = [];
    expect(readRedisDurability(env, redis, problems)).toEqual(expected);
    expect(problems).toHaveLength(problemStarts.length);
    problemStarts.forEach((p, i) => expect(problems[i]).toContain(p));
  });
});

describe('readReplayFence (KEYGATE_REPLAY_FENCE)', () => {
  const cases: Array<[string, Record<string, string>, RedisConnection | undefined, boolean, string[]]> = [
    ['one server: off by default', {}, ONE, false, []],
    ['Sentinel: on by default', {}, SENTINEL, true, []],
    ['Cluster: on by default', {}, CLUSTER, true, []],
    ['one server, turned on', { KEYGATE_REPLAY_FENCE: 'on' }, ONE, true, []],
    ['Sentinel, turned off', { KEYGATE_REPLAY_FENCE: 'off' }, SENTINEL, false, []],
    ['neither on nor off', { KEYGATE_REPLAY_FENCE: 'yes' }, CLUSTER, false, ['KEYGATE_REPLAY_FENCE: "on" or "off"']],
    ['without Redis', { KEYGATE_REPLAY_FENCE: 'on' }, undefined, false, ['KEYGATE_REPLAY_FENCE: only used with Redis']],
  ];
  it.each(cases)('%s', (_name, env, redis, expected, problemStarts) => {
    const problems: string[] = [];
    expect(readReplayFence(env, redis, problems)).toBe(expected);
    expect(problems).toHaveLength(problemStarts.length);
    problemStarts.forEach((p, i) => expect(problems[i]).toContain(p));
  });
});
