import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileRateLimit, type CompiledLimit } from '../../src/policy/rate-limit-spec.js';
import { gcra } from '../../src/store/rate-limit.js';

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
    for (let i = 0; i < 10; i++)
      expect(at(0)).toEqual({
        allowed: true,
        tatUs: t0 + (i + 1) * 100 * ms,
        state: { remaining: 9 - i, resetUs: (i + 1) * 100 * ms, retryAfterUs: 0 },
      });
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
        fc.record({
          count: fc.integer({ min: 1, max: 50 }),
          unit: fc.constantFrom('s', 'm'),
          burst: fc.option(fc.integer({ min: 1, max: 30 }), { nil: undefined }),
        }),
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
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 0, max: 60_000 }), { minLength: 1, maxLength: 300 }),
        (burst, gaps) => {
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
        },
      ),
      { numRuns: 100 },
    );
  });
});
