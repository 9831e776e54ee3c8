import { describe, expect, it } from 'vitest';
import { combine, infoField, type ServerReading } from '../../src/store/redis/connection/redis-server-checks.js';

describe('infoField: one field of an INFO reply', () => {
  const info = '# Memory\r\nused_memory:1024\r\nmaxmemory_policy:volatile-lru\r\n# Persistence\r\naof_enabled:0\r\n';
  it.each([
    ['maxmemory_policy', 'volatile-lru'],
    ['aof_enabled', '0'],
    ['evicted_keys', undefined],
  ])('%s → %s', (name, value) => {
    expect(infoField(info, name)).toBe(value);
  });
});

describe('combine: the worst of the masters read', () => {
  const r = (policy: string | undefined, aof: boolean, evictedKeys = 0): ServerReading => ({
    policy,
    aof,
    evictedKeys,
  });
  it.each([
    ['all noeviction with AOF', [r('noeviction', true), r('noeviction', true)], r('noeviction', true)],
    ['one evicting master', [r('noeviction', true), r('allkeys-lru', true, 3)], r('allkeys-lru', true, 3)],
    ['one master without AOF', [r('noeviction', true, 1), r('noeviction', false, 2)], r('noeviction', false, 3)],
    ['one master whose policy could not be read', [r('noeviction', true), r(undefined, true)], r(undefined, true)],
  ])('%s', (_name, readings, expected) => {
    expect(combine(readings)).toEqual(expected);
  });
});
