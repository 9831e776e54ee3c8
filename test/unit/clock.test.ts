import { afterEach, describe, expect, it, vi } from 'vitest';
import { manualClock, systemClock } from '../../src/clock.js';

// Date.now() is stubbed: the wall clock may step back (NTP), so two real readings promise no order.
afterEach(() => vi.restoreAllMocks());

describe('systemClock', () => {
  it('reads the wall clock, in ms and in ns that agree', () => {
    vi.spyOn(Date, 'now').mockReturnValue(1_795_880_752_465);
    const clock = systemClock();
    expect(clock.nowMs()).toBe(1_795_880_752_465);
    expect(clock.nowNs()).toBe(1_795_880_752_465_000_000n);
  });
});

describe('manualClock: moves only when told to', () => {
  const cases: ReadonlyArray<[string, number, Array<['advance' | 'set', number]>, number, bigint]> = [
    ['stands still', 1_000, [], 1_000, 1_000_000_000n],
    [
      'an epoch start (past 2^53 in ns) keeps its ms',
      1_795_880_752_465,
      [],
      1_795_880_752_465,
      1_795_880_752_465_000_000n,
    ],
    [
      'set to an epoch time keeps its ms',
      0,
      [['set', 1_795_880_752_465]],
      1_795_880_752_465,
      1_795_880_752_465_000_000n,
    ],
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
    vi.spyOn(Date, 'now').mockReturnValue(1_795_880_752_465);
    const clock = manualClock();
    expect(clock.nowMs()).toBe(1_795_880_752_465);
    clock.advance(1);
    expect(clock.nowMs()).toBe(1_795_880_752_466);
  });
});
