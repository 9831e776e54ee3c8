import { describe, expect, it } from 'vitest';
import { manualClock, systemClock } from '../../src/clock.js';

describe('systemClock', () => {
  it('reads the wall clock, in ms and in ns that agree', () => {
    const clock = systemClock();
    const before = Date.now();
    const ms = clock.nowMs();
    const ns = clock.nowNs();
    const after = Date.now();
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
    expect(ns % 1_000_000n).toBe(0n);
    expect(Number(ns / 1_000_000n)).toBeGreaterThanOrEqual(ms);
    expect(Number(ns / 1_000_000n)).toBeLessThanOrEqual(after);
  });
});

describe('manualClock: moves only when told to', () => {
  const cases: ReadonlyArray<[string, number, Array<['advance' | 'set', number]>, number, bigint]> = [
    ['stands still', 1_000, [], 1_000, 1_000_000_000n],
    [
      'advances by whole ms',
      1_000,
      [
        ['advance', 250],
        ['advance', 250],
      ],
      1_500,
      1_500_000_000n,
    ],
    [
      'keeps sub-millisecond steps in ns; ms rounds down',
      1_000,
      [
        ['advance', 0.4],
        ['advance', 0.4],
      ],
      1_000,
      1_000_800_000n,
    ],
    ['goes back when set back (a clock step, as NTP makes)', 5_000, [['set', 2_000]], 2_000, 2_000_000_000n],
    [
      'advances after a set',
      0,
      [
        ['set', 10],
        ['advance', 5],
      ],
      15,
      15_000_000n,
    ],
    ['a fractional start', 1.5, [], 1, 1_500_000n],
  ];
  it.each(cases)('%s', (_name, start, steps, ms, ns) => {
    const clock = manualClock(start);
    for (const [op, by] of steps) clock[op](by);
    expect(clock.nowMs()).toBe(ms);
    expect(clock.nowNs()).toBe(ns);
  });

  it('starts at the wall clock by default', () => {
    const before = Date.now();
    const clock = manualClock();
    expect(clock.nowMs()).toBeGreaterThanOrEqual(before);
    expect(clock.nowMs()).toBeLessThanOrEqual(Date.now());
  });
});
