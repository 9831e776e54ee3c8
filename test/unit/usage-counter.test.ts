import { describe, expect, it } from 'vitest';
import { createUsageCounter } from '../../src/store/redis/usage-counter.js';

const DAY = 86_400_000;
const T = Date.UTC(2026, 0, 31, 23, 59, 59, 0);

describe('createUsageCounter: usage counted in process between two writes', () => {
  it('counts per key and UTC day, keeps the latest instant, and hands each key out once per take()', () => {
    const c = createUsageCounter();
    c.count('a', T);
    c.count('a', T - 5);
    c.count('a', T + 1_000); // the next UTC day
    c.count('b', T);
    expect(c.pendingRequests()).toBe(4);
    const batches = c.take();
    expect(batches.map((b) => [b.apiKey, b.seq, b.usage.lastUsedAtMs, Object.fromEntries(b.usage.perDay)])).toEqual([
      ['a', 1, T + 1_000, { '2026-01-31': 2, '2026-02-01': 1 }],
      ['b', 1, T, { '2026-01-31': 1 }],
    ]);
    for (const b of batches) c.done(b);
    expect(c.take()).toEqual([]);
    expect(c.pendingRequests()).toBe(0);
  });

  it('counts outcome fields in the same batch as the day, never as admitted requests nor as a use', () => {
    const c = createUsageCounter();
    const fields = ['om100:0', 'oh10:0', 'od1:0'];
    c.countFields('refused-only', ['om100:4', 'oh10:4', 'od1:4']);
    c.count('a', T);
    c.countFields('a', fields);
    c.countFields('a', fields);
    expect(c.pendingRequests()).toBe(1);
    const batches = c.take();
    expect(batches.map((b) => [b.apiKey, b.usage.lastUsedAtMs, Object.fromEntries(b.usage.perDay)])).toEqual([
      ['refused-only', 0, { 'om100:4': 1, 'oh10:4': 1, 'od1:4': 1 }],
      ['a', T, { '2026-01-31': 1, 'om100:0': 2, 'oh10:0': 2, 'od1:0': 2 }],
    ]);
  });

  it("counts a request's cost beyond 1 in its day's x: field (issue 42), never as a request", () => {
    const c = createUsageCounter();
    c.count('a', T, 5);
    c.count('a', T, 1);
    c.count('a', T, 3);
    expect(c.pendingRequests()).toBe(3);
    const [batch] = c.take();
    expect(Object.fromEntries(batch!.usage.perDay)).toEqual({ '2026-01-31': 3, 'x:2026-01-31': 6 });
  });

  it('a batch not confirmed comes back with the same seq; new counts wait for it and then get the next seq', () => {
    const c = createUsageCounter();
    c.count('a', T);
    const [first] = c.take();
    c.count('a', T + 10);
    c.count('a', T + 20);
    const retry = c.take();
    expect(retry).toEqual([first]); // same object, same seq: the flush script skips it if it was applied
    expect(c.pendingRequests()).toBe(3);
    c.done(first!);
    const [next] = c.take();
    expect(next!.seq).toBe(2);
    expect(Object.fromEntries(next!.usage.perDay)).toEqual({ '2026-01-31': 2 });
  });

  it('drop() forgets a deleted key, pending and unconfirmed alike', () => {
    const c = createUsageCounter();
    c.count('a', T);
    c.take();
    c.count('a', T + DAY);
    c.drop('a');
    expect(c.take()).toEqual([]);
    expect(c.pendingRequests()).toBe(0);
  });
});
