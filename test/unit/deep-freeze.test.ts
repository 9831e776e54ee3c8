import { describe, expect, it } from 'vitest';
import { deepFreeze } from '../../src/config/deep-freeze.js';

describe('deepFreeze: plain data frozen all the way down, anything else left as built', () => {
  it('freezes nested plain objects and arrays, and returns the same object', () => {
    const config = { a: { b: [1, { c: 'x' }] }, list: [[1], [2]], bare: Object.create(null) as object };
    expect(deepFreeze(config)).toBe(config);
    for (const o of [config, config.a, config.a.b, config.a.b[1], config.list, config.list[0], config.bare])
      expect(Object.isFrozen(o)).toBe(true);
    expect(() => {
      (config.a.b[1] as { c: string }).c = 'y';
    }).toThrow(TypeError);
  });

  const live: ReadonlyArray<[string, () => object]> = [
    ['a URL', () => new URL('http://upstream:8080/')],
    ['a Set', () => new Set([1])],
    ['a Map', () => new Map([[1, 2]])],
    ['bytes', () => Buffer.from('key')],
    ['a class instance', () => new (class Thing {})()],
  ];
  it.each(live)('leaves %s unfrozen, inside a frozen object', (_name, make) => {
    const value = make();
    const holder = deepFreeze({ value });
    expect(Object.isFrozen(holder)).toBe(true);
    expect(Object.isFrozen(value)).toBe(false);
  });

  it.each([1, 'text', null, undefined, true])('returns the primitive %j as it is', (v) => {
    expect(deepFreeze(v)).toBe(v);
  });

  it('stops at an object already frozen (a shared frozen default is not walked again)', () => {
    const inner = { x: 1 };
    const shared = Object.freeze({ inner });
    deepFreeze({ shared });
    expect(Object.isFrozen(inner)).toBe(false);
  });
});
