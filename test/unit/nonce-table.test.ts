import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BASE_WIDTH_MS, createNonceTable } from '../../src/store/memory/nonce-table.js';

const widthFor = (ttlMs: number) => {
  let w = BASE_WIDTH_MS;
  while (w * 8 < ttlMs) w *= 2;
  return w;
};

/** The rule the Map of "apiKey\0nonce" → expiry kept, and the table must keep: a replay while an expiry is after now. */
function referenceSet() {
  const held = new Map<string, number>();
  const admissions: Array<{ exp: number; ttlMs: number }> = [];
  return {
    admitOnce(apiKey: string, nonce: string, ttlMs: number, nowMs: number): boolean {
      const k = `${apiKey}\0${nonce}`;
      const exp = held.get(k);
      if (exp !== undefined && exp > nowMs) return false;
      held.set(k, nowMs + ttlMs);
      admissions.push({ exp: nowMs + ttlMs, ttlMs });
      return true;
    },
    /** Entries the table may still hold at `nowMs`: admissions whose expiry plus their bucket's width is after now. */
    mayHold(nowMs: number) {
      return admissions.filter((a) => a.exp + widthFor(a.ttlMs) > nowMs).length;
    },
  };
}

// Nonces as decodeToken hands them on (decimal, no leading zero, up to 20 digits, around "now" in ns),
// small ones, and strings outside that form (the store contract admits any string).
const nonce = fc.oneof(
  fc.bigInt({ min: 1_700_000_000_000_000_000n, max: 1_700_000_000_000_000_012n }).map(String),
  fc.integer({ min: 0, max: 6 }).map(String),
  fc.bigInt({ min: 10_000_000_000n, max: 10_000_000_005n }).map(String), // across the 10-digit split
  fc.bigInt({ min: 99_999_999_999_999_999_990n, max: 99_999_999_999_999_999_999n }).map(String), // 20 digits
  fc.constantFrom('007', '7 ', 'n1', '', '-1', '1e3'),
);
const op = fc.oneof(
  fc.record({
    kind: fc.constant('admit' as const),
    key: fc.constantFrom('a', 'b', ''),
    nonce,
    ttlMs: fc.constantFrom(1, 500, 15_000, 65_000, 200_000),
  }),
  fc.record({
    kind: fc.constant('step' as const),
    ms: fc.oneof(fc.integer({ min: 0, max: 1_500 }), fc.integer({ min: 0, max: 40_000 })),
  }),
  fc.record({ kind: fc.constant('sweep' as const) }),
);

describe('nonce table', () => {
  it('admits a (key, nonce) once while held and again after it expired, as the reference set does; keeps no more than rate × (TTL + bucket width)', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), fc.integer({ min: 0, max: 2 ** 40 }), (ops, start) => {
        const table = createNonceTable();
        const ref = referenceSet();
        let now = start;
        for (const o of ops) {
          if (o.kind === 'step') now += o.ms;
          else if (o.kind === 'sweep') table.sweep(now);
          else {
            const expected = ref.admitOnce(o.key, o.nonce, o.ttlMs, now);
            expect(table.admitOnce(o.key, o.nonce, o.ttlMs, now), `${o.key}/${o.nonce} at ${now}`).toBe(expected);
          }
          table.sweep(now);
          expect(table.size()).toBeLessThanOrEqual(ref.mayHold(now));
        }
        // Everything expired: nothing is held.
        now += 200_000 + widthFor(200_000);
        table.sweep(now);
        expect(table.size()).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it.each([1, 500, 1_024, 15_000, 65_000, 200_000])(
    'holds an entry of TTL %i ms until its own expiry, through sweeps, whatever its bucket shares',
    (ttlMs) => {
      const table = createNonceTable();
      const t0 = 5_000_000 + 333; // not on a bucket boundary
      expect(table.admitOnce('k', '1', ttlMs, t0)).toBe(true);
      expect(table.admitOnce('k', '2', 1, t0)).toBe(true); // a neighbour that ends at once
      for (const at of [t0, t0 + 1, t0 + ttlMs - 1].filter((t) => t < t0 + ttlMs)) {
        table.sweep(at);
        expect(table.admitOnce('k', '1', ttlMs, at), `at +${at - t0} ms`).toBe(false);
      }
      table.sweep(t0 + ttlMs);
      expect(table.admitOnce('k', '1', ttlMs, t0 + ttlMs)).toBe(true); // expired: a new admission
    },
  );

  it('tells apart nonces and keys that differ only where the layout splits them', () => {
    const table = createNonceTable();
    const now = 1_000;
    const nonces = ['1', '10', '1000000000', '10000000000', '100000000000', '12345678901234567890', '0'];
    for (const n of nonces)
      for (const k of ['k', 'k2']) expect(table.admitOnce(k, n, 60_000, now), `${k}/${n}`).toBe(true);
    for (const n of nonces)
      for (const k of ['k', 'k2']) expect(table.admitOnce(k, n, 60_000, now), `${k}/${n}`).toBe(false);
    expect(table.size()).toBe(nonces.length * 2);
  });

  it('holds a steady rate in memory bounded by rate × window: whole buckets are freed as they end', () => {
    const table = createNonceTable();
    const ttlMs = 15_000;
    let now = 1_700_000_000_000;
    let nonceNs = BigInt(now) * 1_000_000n;
    const perMs = 2; // 2,000 admissions a second
    let peak = 0;
    let refused = 0;
    for (let ms = 0; ms < 4 * ttlMs; ms++, now++) {
      for (let i = 0; i < perMs; i++) if (!table.admitOnce('k', String((nonceNs += 1n)), ttlMs, now)) refused++;
      peak = Math.max(peak, table.size());
    }
    expect(refused).toBe(0);
    expect(peak).toBeLessThanOrEqual(perMs * (ttlMs + widthFor(ttlMs)));
    expect(peak).toBeGreaterThanOrEqual(perMs * ttlMs);
  });

  it('grows a bucket past its first capacity without losing an entry', () => {
    const table = createNonceTable();
    const n = 10_000; // one bucket (same expiry), several doublings
    for (let i = 0; i < n; i++)
      expect(table.admitOnce('k', String(1_700_000_000_000_000_000n + BigInt(i)), 60_000, 0)).toBe(true);
    for (let i = 0; i < n; i++)
      expect(table.admitOnce('k', String(1_700_000_000_000_000_000n + BigInt(i)), 60_000, 1)).toBe(false);
    expect(table.size()).toBe(n);
  });
});
