import { describe, expect, it } from 'vitest';
import {
  compileRateLimit,
  describeRateLimit,
  parseRate,
  parseRateLimitSpec,
} from '../../src/policy/rate-limit-spec.js';
import { gcra } from '../../src/store/rate-limit.js';

describe('parseRate / parseRateLimitSpec', () => {
  it.each([
    ['100/s', { count: 100, periodUs: 1_000_000 }],
    ['5/m', { count: 5, periodUs: 60_000_000 }],
    [' 1/h ', { count: 1, periodUs: 3_600_000_000 }],
  ])('%s', (raw, want) => expect(parseRate(raw)).toEqual(want));

  it.each(['0/s', '100', '100/d', '1.5/s', '-1/s', '100/ s', '2000000/s', '', 'none'])('refuses %j', (raw) => {
    expect(typeof parseRate(raw)).toBe('string');
  });

  it.each([
    [{ rate: '10/s' }, { rate: '10/s' }, []],
    [{ rate: '10/s', burst: 20 }, { rate: '10/s', burst: 20 }, []],
    [{ rate: '10/s', burst: 0 }, undefined, ['x.burst: must be an integer from 1 to 1000000']],
    [{ rate: '10/s', burst: 1.5 }, undefined, ['x.burst: must be an integer from 1 to 1000000']],
    [{ rate: '10/x' }, undefined, ['x.rate: expected <count>/s, /m or /h with a count from 1 to 1000000, got "10/x"']],
    [{ burst: 3 }, undefined, ['x.rate: required, like "100/s"']],
    [{ rate: '1/s', every: 1 }, { rate: '1/s' }, ['x: unknown field "every"']],
    ['10/s', undefined, ['x: must be an object like { rate: "100/s", burst: 200 }']],
    [undefined, undefined, []],
  ])('%j', (input, want, problems) => {
    const errors: string[] = [];
    expect(parseRateLimitSpec(input, 'x', errors)).toEqual(want);
    expect(errors).toEqual(problems);
  });

  it('compiles the interval (rounded up), the burst (default: the count) and the policy header', () => {
    expect(compileRateLimit({ rate: '100/s' })).toEqual({
      intervalUs: 10_000,
      burst: 100,
      policyHeader: '"keygate";q=100;w=1',
      name: 'keygate',
      shown: '100/s',
    });
    expect(compileRateLimit({ rate: '100/s', burst: 200 })).toEqual({
      intervalUs: 10_000,
      burst: 200,
      policyHeader: '"keygate";q=200;w=2',
      name: 'keygate',
      shown: '100/s burst 200',
    });
    expect(compileRateLimit({ rate: '3/s' })).toEqual({
      intervalUs: 333_334,
      burst: 3,
      policyHeader: '"keygate";q=3;w=1',
      name: 'keygate',
      shown: '3/s',
    });
    expect(compileRateLimit({ rate: '1000/h' }).policyHeader).toBe('"keygate";q=1000;w=3600');
    // Issue 42: the owner's and the IP's budgets carry their own names in the RateLimit fields.
    expect(compileRateLimit({ rate: '12/h' }, 'keygate-owner')).toMatchObject({
      policyHeader: '"keygate-owner";q=12;w=3600',
      name: 'keygate-owner',
    });
    expect(describeRateLimit({ rate: '10/s', burst: 20 })).toBe('10/s burst 20');
    expect(describeRateLimit(undefined)).toBe('none');
  });
});

/**
 * `w` in RateLimit-Policy is the seconds the whole burst takes to come back: spend a fresh budget whole at 0,
 * and the whole burst passes again at w seconds (plus the interval's rounding up to a whole µs, at most one µs per
 * unit), never at w − 1 seconds. Checked against the limit as enforced (gcra), over rates and bursts whose time
 * is and is not a whole number of seconds.
 */
describe('RateLimit-Policy w', () => {
  const wOf = (header: string) => Number(/;w=(\d+)$/.exec(header)?.[1]);
  /** Whether `burst` units pass back to back at `atUs`, after the whole burst was spent at 0. */
  function wholeBurstBackAt(limit: ReturnType<typeof compileRateLimit>, atUs: number): boolean {
    let tat = 0;
    for (let i = 0; i < limit.burst; i++) {
      const step = gcra(tat, 0, limit);
      if (!step.allowed) throw new Error('a fresh budget passes its whole burst');
      tat = step.tatUs;
    }
    for (let i = 0; i < limit.burst; i++) {
      const step = gcra(tat, atUs, limit);
      if (!step.allowed) return false;
      tat = step.tatUs;
    }
    return true;
  }

  it.each([
    ['1/s', undefined, 1],
    ['3/s', undefined, 1],
    ['7/s', undefined, 1],
    ['10/s', undefined, 1],
    ['100/s', undefined, 1],
    ['3/s', 4, 2],
    ['7/s', 15, 3],
    ['100/s', 200, 2],
    ['6/m', undefined, 60],
    ['7/m', 3, 26],
    ['10/m', 60, 360],
    ['1000/h', undefined, 3600],
    ['7/h', 1, 515],
    ['999999/s', 1, 1],
    ['1000000/h', 1000000, 3600],
  ])('%s burst %s: w=%i, the seconds until the whole burst is back', (rate, burst, w) => {
    const limit = compileRateLimit(burst === undefined ? { rate } : { rate, burst });
    expect(wOf(limit.policyHeader)).toBe(w);
    expect(wholeBurstBackAt(limit, w * 1_000_000 + limit.burst)).toBe(true);
    if (w > 1) expect(wholeBurstBackAt(limit, (w - 1) * 1_000_000)).toBe(false);
  });
});
