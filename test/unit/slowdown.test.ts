import { describe, expect, it } from 'vitest';
import { MAX_SLOWDOWN, measureSlowdown, QUIET_NODE_START_MS } from '../helpers/slowdown.js';

/** The hang-guard factor: 1 on a quiet machine, the median start time over a quiet one's when busy, capped. */
describe('measureSlowdown', () => {
  const times = (...ms: number[]) => {
    const queue = [...ms];
    return () => queue.shift() as number;
  };
  it.each([
    ['a quiet machine', [40, 45, 50, 60, 2_000], 1],
    [
      'a busy one: the median, not one outlier',
      [900, 1_200, 1_400, 1_900, 2_400],
      Math.ceil(1_400 / QUIET_NODE_START_MS),
    ],
    ['a saturated one: capped', [9_000, 9_000, 9_000, 9_000, 9_000], MAX_SLOWDOWN],
  ])('%s', (_name, samples, expected) => {
    expect(measureSlowdown({}, times(...samples))).toBe(expected);
  });
  it('a factor given in KEYGATE_TEST_SLOWDOWN is used as given (capped), without measuring', () => {
    const never = () => {
      throw new Error('measured');
    };
    expect(measureSlowdown({ KEYGATE_TEST_SLOWDOWN: '3' }, never)).toBe(3);
    expect(measureSlowdown({ KEYGATE_TEST_SLOWDOWN: '500' }, never)).toBe(MAX_SLOWDOWN);
  });
});
