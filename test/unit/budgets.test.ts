import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileRateLimit, type CompiledLimit } from '../../src/policy/rate-limit-spec.js';
import { chargeBudgets, retryAfterUs, tatNow } from '../../src/store/budgets.js';

/**
 * Reference model, written independently of chargeBudgets(): one weighted leaky bucket per budget
 * (ITU-T I.371, continuous state). A bucket drains one unit per µs; a request of cost c fits a
 * bucket when its drained content plus c·T is at most burst·T; the request passes when it fits
 * every bucket, and then (only then) adds c·T to each.
 */
function referenceModel(limits: readonly CompiledLimit[]) {
  const content = limits.map(() => 0);
  const last = limits.map(() => -Infinity);
  return (t: number, cost: number): boolean => {
    const drained = limits.map((_, i) => Math.max(0, (content[i] as number) - (t - (last[i] as number))));
    const fits = limits.every((l, i) => (drained[i] as number) + cost * l.intervalUs <= l.burst * l.intervalUs);
    if (!fits) return false;
    limits.forEach((l, i) => {
      content[i] = (drained[i] as number) + cost * l.intervalUs;
      last[i] = t;
    });
    return true;
  };
}

/** Drives chargeBudgets() as a store would, with an injected clock: TATs stored only on a pass. */
function runStore(limits: readonly CompiledLimit[]) {
  let tats = limits.map(() => 0);
  return (t: number, cost: number) => {
    const before = tats;
    const step = chargeBudgets(tats, t, limits, cost);
    if (step.allowed) tats = [...step.tatsUs];
    return { step, before, after: tats };
  };
}

const T0 = 1_700_000_000_000_000;
const S = 1_000_000;

describe('chargeBudgets', () => {
  const key = compileRateLimit({ rate: '50/h', burst: 50 }); // T = 72 s
  const owner = compileRateLimit({ rate: '12/h' }); // T = 300 s, burst 12

  it.each<[name: string, limits: CompiledLimit[], cost: number, admitted: number, refusedBy: number]>([
    ['one budget of 50, cost 5: exactly 10 at once', [key], 5, 10, 0],
    ['one budget of 50, cost 1: exactly 50', [key], 1, 50, 0],
    ['cost above the burst never fits', [compileRateLimit({ rate: '4/s' })], 5, 0, 0],
    ['key 50 and owner 12, cost 1: the owner is the tightest', [key, owner], 1, 12, 1],
    ['key 50 and owner 12, cost 5: 2 (10 of 12 spent, 5 more do not fit)', [key, owner], 5, 2, 1],
    ['owner 12 then key 50 (order does not matter for how many pass)', [owner, key], 1, 12, 0],
  ])('table: %s', (_name, limits, cost, admitted, refusedBy) => {
    const store = runStore(limits);
    let passed = 0;
    let refused;
    for (let i = 0; i < 100; i++) {
      const { step, before, after } = store(T0, cost);
      if (step.allowed) passed++;
      else {
        refused ??= step;
        expect(after).toBe(before); // nothing spent
      }
    }
    expect(passed).toBe(admitted);
    expect(refused?.allowed === false && refused.refusedBy).toBe(refusedBy);
  });

  it('table: states count in cost units; a refusal reports what is left and when the cost fits', () => {
    const store = runStore([key, owner]);
    const first = store(T0, 5).step;
    expect(first).toEqual({
      allowed: true,
      tatsUs: [T0 + 5 * 72 * S, T0 + 5 * 300 * S],
      states: [
        { remaining: 45, resetUs: 5 * 72 * S, retryAfterUs: 0 },
        { remaining: 7, resetUs: 5 * 300 * S, retryAfterUs: 0 },
      ],
    });
    store(T0, 5);
    const third = store(T0, 5).step; // owner has 2 left: refused by the owner, the key keeps its 40
    expect(third).toEqual({
      allowed: false,
      refusedBy: 1,
      states: [
        { remaining: 40, resetUs: 10 * 72 * S, retryAfterUs: 0 },
        { remaining: 2, resetUs: 10 * 300 * S, retryAfterUs: 3 * 300 * S },
      ],
      clampedUs: [undefined, undefined], // within their bursts: nothing to write back
    });
    expect(retryAfterUs(third.states)).toBe(900 * S);
    expect(store(T0 + 900 * S - 1, 5).step.allowed).toBe(false);
    expect(store(T0 + 900 * S, 5).step.allowed).toBe(true);
  });

  const limitArb = fc
    .record({
      count: fc.integer({ min: 1, max: 20 }),
      burst: fc.integer({ min: 1, max: 30 }),
      unit: fc.constantFrom('s', 'm'),
    })
    .map(({ count, burst, unit }) => compileRateLimit({ rate: `${count}/${unit}`, burst }));
  const runs = Number(process.env.KEYGATE_PROPERTY_RUNS ?? 150);

  it('property: the same decisions as the reference model, for 1 to 3 budgets and any costs and arrival times', () => {
    fc.assert(
      fc.property(
        fc.array(limitArb, { minLength: 1, maxLength: 3 }),
        fc.array(fc.record({ gapUs: fc.integer({ min: 0, max: 20 * S }), cost: fc.integer({ min: 1, max: 12 }) }), {
          maxLength: 120,
        }),
        (limits, arrivals) => {
          const model = referenceModel(limits);
          const store = runStore(limits);
          let t = T0;
          for (const { gapUs, cost } of arrivals) {
            t += gapUs;
            const { step, before, after } = store(t, cost);
            expect(step.allowed).toBe(model(t, cost));
            if (!step.allowed) expect(after).toBe(before);
          }
        },
      ),
      { numRuns: runs },
    );
  });

  it('property: never admits more than the tightest budget allows over any span, never spends on a refusal', () => {
    fc.assert(
      fc.property(
        fc.array(limitArb, { minLength: 1, maxLength: 3 }),
        fc.array(fc.record({ gapUs: fc.integer({ min: 0, max: 5 * S }), cost: fc.integer({ min: 1, max: 8 }) }), {
          maxLength: 150,
        }),
        (limits, arrivals) => {
          const store = runStore(limits);
          const admitted: Array<{ t: number; cost: number }> = [];
          let t = T0;
          for (const { gapUs, cost } of arrivals) {
            t += gapUs;
            const { step, before, after } = store(t, cost);
            if (step.allowed) admitted.push({ t, cost });
            else expect(after).toEqual(before);
          }
          // Over every span [a, b] of admitted requests, each budget passed at most burst + (b - a) / T cost units.
          for (let i = 0; i < admitted.length; i++) {
            let spent = 0;
            for (let j = i; j < admitted.length; j++) {
              spent += (admitted[j] as { cost: number }).cost;
              const span = (admitted[j] as { t: number }).t - (admitted[i] as { t: number }).t;
              for (const l of limits) expect(spent).toBeLessThanOrEqual(l.burst + span / l.intervalUs);
            }
          }
        },
      ),
      { numRuns: runs },
    );
  });
});

describe('a raised limit applies at once', () => {
  it("a TAT stored under a slower rate is clamped to the new burst and stored back: the old rate's debt does not carry over", () => {
    const slow = compileRateLimit({ rate: '1/m', burst: 1 }); // T = 60 s
    const fast = compileRateLimit({ rate: '60/s', burst: 60 }); // T ≈ 16.7 ms, whole burst back in 1 s
    const spent = chargeBudgets([0], 0, [slow], 1);
    const tat = spent.allowed ? (spent.tatsUs[0] as number) : NaN; // 60 s ahead
    expect(chargeBudgets([tat], 1_000, [slow], 1)).toMatchObject({ allowed: false, clampedUs: [undefined] });
    // Under the raised limit the budget counts as just spent whole: the refusal says to store that back...
    const refused = chargeBudgets([tat], 1_000, [fast], 1);
    expect(refused).toMatchObject({ allowed: false, clampedUs: [1_000 + 60 * fast.intervalUs] });
    expect(refused.states[0]).toEqual({ remaining: 0, resetUs: 60 * fast.intervalUs, retryAfterUs: fast.intervalUs });
    // ...and from the stored value, one interval later the request fits, well within 1 s.
    const stored = refused.allowed ? NaN : (refused.clampedUs[0] as number);
    expect(chargeBudgets([stored], 1_000 + fast.intervalUs, [fast], 1)).toMatchObject({ allowed: true });
  });
});

/**
 * A changed limit keeps the units spent (tatNow with the interval the TAT was written under): over random limits,
 * spends and waits, a raise (rate and burst each the same or larger) never leaves less room than the old limit
 * left at that moment, and a cut leaves the old room less what the smaller burst cannot hold, never more.
 */
describe('a changed limit keeps the units spent', () => {
  const rates = ['1/h', '7/h', '10/m', '60/m', '3/s', '7/s', '100/s', '1000/s'];
  const room = (tat: number, now: number, limit: CompiledLimit) =>
    Math.max(0, Math.floor((limit.burst * limit.intervalUs - (tat - now)) / limit.intervalUs));
  it('a raise never leaves less room; a cut never more than the old room or the new burst', () => {
    let seed = 42;
    const rand = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let run = 0; run < 5_000; run++) {
      const [i, j] = [rand(rates.length), rand(rates.length)];
      const oldLimit = compileRateLimit({ rate: rates[i] as string, burst: 1 + rand(50) });
      const newLimit = compileRateLimit({ rate: rates[j] as string, burst: 1 + rand(50) });
      const spent = rand(oldLimit.burst + 1);
      const t0 = 1_700_000_000_000_000;
      const tat = t0 + spent * oldLimit.intervalUs;
      const now = t0 + rand(spent * oldLimit.intervalUs + 1);
      const before = room(tat, now, oldLimit);
      const after = room(tatNow(tat, now, newLimit, oldLimit.intervalUs), now, newLimit);
      const case_ = { old: oldLimit.shown, new: newLimit.shown, spent, elapsedUs: now - t0, before, after };
      const raise = newLimit.intervalUs <= oldLimit.intervalUs && newLimit.burst >= oldLimit.burst;
      if (raise) expect(after, JSON.stringify(case_)).toBeGreaterThanOrEqual(before);
      // Units spent are kept: the room is the new burst less them, so at most the old room plus what the burst grew.
      expect(after, JSON.stringify(case_)).toBeLessThanOrEqual(Math.max(0, before + newLimit.burst - oldLimit.burst));
      expect(after).toBeLessThanOrEqual(newLimit.burst);
    }
  });
});
