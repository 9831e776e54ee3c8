import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import {
  compileCredits,
  KEY_CREDITS_NAME,
  nextSetAt,
  OWNER_CREDITS_NAME,
  parseCredits,
  parseRefill,
  periodEndSec,
  periodOf,
} from '../../src/keys/credits.js';
import { chargeCredits, topUp } from '../../src/store/credits.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import type { Charge } from '../../src/store/store.js';

describe('credits spec (keys/credits.ts)', () => {
  it.each([
    [{ remaining: -1 }, 'k.credits.remaining'],
    [{ remaining: 1.5 }, 'k.credits.remaining'],
    [{ remaining: '10' }, 'k.credits.remaining'],
    [{ remaining: 2 ** 53 }, 'k.credits.remaining'],
    [{ remaining: 1, refill: { amount: 2 ** 53 + 2, interval: 'day' } }, 'k.credits.refill.amount'],
    [{ remaining: 1, refill: { amount: -3, interval: 'day' } }, 'k.credits.refill.amount'],
    [{ remaining: 1, refill: { amount: 3, interval: 'week' } }, 'k.credits.refill.interval'],
    [{ remaining: 1, extra: true }, 'unknown field "extra"'],
    [[1], 'k.credits: must be an object'],
  ])('refuses %j naming the field', (input, named) => {
    const errors: string[] = [];
    expect(parseCredits(input, 'k.credits', errors)).toBeUndefined();
    expect(errors.join('; ')).toContain(named);
  });

  it('accepts a balance with a refill, and the CLI form of the refill', () => {
    const errors: string[] = [];
    expect(parseCredits({ remaining: 10, refill: { amount: 5, interval: 'month' } }, 'c', errors)).toEqual({
      remaining: 10,
      refill: { amount: 5, interval: 'month' },
    });
    expect(parseRefill('10000/month', 'r', errors)).toEqual({ amount: 10000, interval: 'month' });
    expect(errors).toEqual([]);
    expect(parseRefill('10/week', 'r', errors)).toBeUndefined();
    expect(errors[0]).toMatch(/^r: /);
  });

  it('orders sets even when this clock is behind the last set', () => {
    expect(nextSetAt(undefined, 500)).toBe(500);
    expect(nextSetAt({ remaining: 1, setAt: 900 }, 500)).toBe(901);
  });

  it('names the quota policy for RateLimit-Policy', () => {
    expect(compileCredits({ remaining: 7 }, KEY_CREDITS_NAME).policyHeader).toBe('"keygate-credits";q=7');
    expect(
      compileCredits({ remaining: 7, refill: { amount: 100, interval: 'day' } }, OWNER_CREDITS_NAME).policyHeader,
    ).toBe('"keygate-owner-credits";q=100;w=86400');
  });

  it('computes periods against the calendar for every day of 2023-2025', () => {
    for (let t = Date.UTC(2023, 0, 1); t < Date.UTC(2026, 0, 1); t += 86_400_000) {
      const d = new Date(t);
      const sec = t / 1000 + 43_200;
      expect(periodOf(2, sec)).toBe(d.getUTCFullYear() * 12 + d.getUTCMonth());
      expect(periodEndSec(2, periodOf(2, sec)) * 1000).toBe(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
    }
  });
});

describe('credits balance (store/credits.ts)', () => {
  const spec = compileCredits({ remaining: 3, setAt: 1_000 }, KEY_CREDITS_NAME);
  it('spends all or nothing over several credits and reports the transition to zero once', () => {
    const owner = compileCredits({ remaining: 1, setAt: 1_000 }, OWNER_CREDITS_NAME);
    const first = chargeCredits([undefined, undefined], 10, [spec, owner], 1);
    expect(first).toMatchObject({ allowed: true, drained: 2 });
    const next = first.allowed ? first.next : [];
    const second = chargeCredits(next, 10, [spec, owner], 1);
    expect(second).toMatchObject({ allowed: false, refusedBy: 1 });
    expect(second.states).toEqual([
      { remaining: 2, refillInS: -1 },
      { remaining: 0, refillInS: -1 },
    ]);
  });
  it('tops up on the balance as it counts now, and refuses past the most', () => {
    expect(topUp(undefined, spec, 10, 5)?.r).toBe(8);
    expect(topUp(undefined, spec, 10, Number.MAX_SAFE_INTEGER)).toBeUndefined();
  });
});

describe('memory store: credits refill on a manual clock', () => {
  const cases = [
    ['day', '2026-03-31T23:59:59Z', '2026-04-01T00:00:00Z', 1],
    ['month', '2026-03-31T23:59:59Z', '2026-04-01T00:00:00Z', 1],
    ['month', '2026-02-28T23:59:59Z', '2026-03-01T00:00:00Z', 1],
    ['month', '2028-02-28T23:59:59Z', '2028-02-29T00:00:00Z', 0], // a leap day is not a new month
    ['day', '2028-02-28T23:59:59Z', '2028-02-29T00:00:00Z', 1],
  ] as const;
  it.each(cases)('%s refill: spent out at %s, refilled at %s: %i', async (interval, before, after, refilled) => {
    const clock = manualClock(Date.parse(before) - 10_000);
    const store = createMemoryStore({}, { clock });
    const spec = compileCredits(
      { remaining: 2, refill: { amount: 5, interval }, setAt: clock.nowMs() },
      KEY_CREDITS_NAME,
    );
    const charge: Charge = { cost: 1, owner: undefined, budgets: [], credits: [{ kind: 'key', spec }] };
    clock.advance(Date.parse(before) - clock.nowMs());
    expect((await store.admit('k', 'a', 60_000, charge)).outcome).toBe('admitted');
    expect((await store.admit('k', 'b', 60_000, charge)).outcome).toBe('admitted');
    const out = await store.admit('k', 'c', 60_000, charge);
    expect(out).toMatchObject({
      outcome: 'exhausted',
      credits: [{ remaining: 0, refillInS: refilled ? 1 : expect.any(Number) }],
    });
    clock.advance(Date.parse(after) - clock.nowMs());
    const next = await store.admit('k', 'c', 60_000, charge);
    if (refilled) expect(next).toMatchObject({ outcome: 'admitted', credits: [{ remaining: 4 }] });
    else expect(next.outcome).toBe('exhausted');
    await store.close();
  });
});
