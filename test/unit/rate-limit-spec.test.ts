import { describe, expect, it } from 'vitest';
import {
  compileRateLimit,
  describeRateLimit,
  parseRate,
  parseRateLimitSpec,
} from '../../src/policy/rate-limit-spec.js';

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
      policyHeader: '"keygate";q=3;w=2',
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
