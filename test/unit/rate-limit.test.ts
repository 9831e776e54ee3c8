import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileRateLimit, describeRateLimit, gcra, parseRate, parseRateLimitSpec, type CompiledLimit } from '../../src/store/rate-limit.js';

/**
 * Reference model: the continuous-state leaky bucket (ITU-T I.371), written
 * independently of gcra(). A bucket drains one unit per µs; each conforming
 * request adds T; a request conforms when the drained content is at most
 * (burst - 1) * T. GCRA (virtual scheduling) must take exactly the same decisions.
 */
function leakyBucket(limit: CompiledLimit) {
  let content = 0;
  let last = -Infinity;
  return (t: number): boolean => {
    const drained = Math.max(0, content - (t - last));
    if (drained > (limit.burst - 1) * limit.intervalUs) return false;
    content = drained + limit.intervalUs;
    last = t;
    return true;
  };
}

/** Drives gcra() over arrival times (µs) with an injected clock, as a store would. */
function runGcra(limit: CompiledLimit, arrivals: readonly number[]): boolean[] {
  let tat = 0;
  return arrivals.map((t) => {
    const step = gcra(tat, t, limit);
    if (step.allowed) tat = step.tatUs;
    return step.allowed;
  });
}

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
    expect(compileRateLimit({ rate: '100/s' })).toEqual({ intervalUs: 10_000, burst: 100, policyHeader: '"keygate";q=100;w=1' });
    expect(compileRateLimit({ rate: '100/s', burst: 200 })).toEqual({ intervalUs: 10_000, burst: 200, policyHeader: '"keygate";q=200;w=2' });
    expect(compileRateLimit({ rate: '3/s' })).toEqual({ intervalUs: 333_334, burst: 3, policyHeader: '"keygate";q=3;w=2' });
    expect(compileRateLimit({ rate: '1000/h' }).policyHeader).toBe('"keygate";q=1000;w=3600');
    expect(describeRateLimit({ rate: '10/s', burst: 20 })).toBe('10/s burst 20');
    expect(describeRateLimit(undefined)).toBe('none');
  });
});

describe('gcra', () => {
  const ten = compileRateLimit({ rate: '10/s', burst: 10 }); // T = 100 ms
  const ms = 1_000;

  it('table: burst at once, then one per interval, with remaining / reset / retry-after', () => {
    let tat = 0;
    const t0 = 1_700_000_000_000_000;
    const at = (offsetMs: number) => {
      const step = gcra(tat, t0 + offsetMs * ms, ten);
      if (step.allowed) tat = step.tatUs;
      return step;
    };
    for (let i = 0; i < 10; i++) expect(at(0)).toEqual({ allowed: true, tatUs: t0 + (i + 1) * 100 * ms, state: { remaining: 9 - i, resetUs: (i + 1) * 100 * ms, retryAfterUs: 0 } });
    expect(at(0)).toEqual({ allowed: false, state: { remaining: 0, resetUs: 1_000 * ms, retryAfterUs: 100 * ms } });
    expect(at(40)).toEqual({ allowed: false, state: { remaining: 0, resetUs: 960 * ms, retryAfterUs: 60 * ms } });
    expect(at(100)).toMatchObject({ allowed: true, state: { remaining: 0, resetUs: 1_000 * ms } });
    expect(at(100)).toMatchObject({ allowed: false });
    // Idle for longer than a whole burst: back to full, never more (no credit piles up).
    for (let i = 0; i < 10; i++) expect(at(5_000).allowed).toBe(true);
    expect(at(5_000).allowed).toBe(false);
  });

  it('property: takes the same decisions as the leaky-bucket reference model', () => {
    fc.assert(
      fc.property(
        fc.record({ count: fc.integer({ min: 1, max: 50 }), unit: fc.constantFrom('s', 'm'), burst: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }) }),
        fc.array(fc.integer({ min: 0, max: 400_000 }), { minLength: 1, maxLength: 200 }),
        ({ count, unit, burst }, gaps) => {
          const limit = compileRateLimit({ rate: `${count}/${unit}`, ...(burst !== undefined && { burst }) });
          let t = 1_700_000_000_000_000;
          const arrivals = gaps.map((g) => (t += g));
          const model = leakyBucket(limit);
          expect(runGcra(limit, arrivals)).toEqual(arrivals.map((a) => model(a)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('property: over any span d, at most burst + d / T pass (no window-edge doubling)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.array(fc.integer({ min: 0, max: 60_000 }), { minLength: 1, maxLength: 300 }), (burst, gaps) => {
        const limit = compileRateLimit({ rate: '10/s', burst });
        let t = 0;
        const arrivals = gaps.map((g) => (t += g));
        const decisions = runGcra(limit, arrivals);
        const passed = arrivals.filter((_, i) => decisions[i]);
        for (let i = 0; i < passed.length; i++) {
          for (let j = i; j < passed.length; j++) {
            const span = (passed[j] as number) - (passed[i] as number);
            expect(j - i + 1).toBeLessThanOrEqual(burst + Math.floor(span / limit.intervalUs));
          }
        }
      }),
      { numRuns: 100 },
    );
  });
});
