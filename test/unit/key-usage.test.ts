import { describe, expect, it } from 'vitest';
import { createUtcDayOf, parseUsageDays, usageReport, USAGE_DAYS, utcDay } from '../../src/keys/key-usage.js';

describe('parseUsageDays', () => {
  it.each<[raw: string | undefined, days: number | undefined]>([
    [undefined, 30],
    ['1', 1],
    [String(USAGE_DAYS), USAGE_DAYS],
    ['0', undefined],
    [String(USAGE_DAYS + 1), undefined],
    ['', undefined],
    ['7.5', undefined],
    ['-3', undefined],
    ['100', undefined],
  ])('%j → %j', (raw, days) => {
    expect(parseUsageDays(raw)).toBe(days);
  });
});

describe('usageReport', () => {
  it('covers the last `days` UTC days, oldest first, with the total, the cost spent and lastUsedAt', () => {
    const now = Date.parse('2026-03-10T12:00:00Z');
    const usage = {
      lastUsedAtMs: now - 1_000,
      perDay: { '2026-03-10': 4, '2026-03-08': 1, '2026-03-01': 9 },
      // Issue 42: the cost beyond one per request (4 requests on 03-10 spent 4 + 12 = 16).
      extraCostPerDay: { '2026-03-10': 12, '2026-03-01': 40 },
    };
    expect(usageReport({ apiKey: 'k', id: 'i' }, usage, 3, now)).toEqual({
      apiKey: 'k',
      id: 'i',
      lastUsedAt: '2026-03-10T11:59:59.000Z',
      days: 3,
      total: 5,
      cost: 17,
      perDay: [
        { day: '2026-03-08', requests: 1, cost: 1 },
        { day: '2026-03-09', requests: 0, cost: 0 },
        { day: '2026-03-10', requests: 4, cost: 16 },
      ],
    });
  });

  it('says null for a key never used', () => {
    expect(usageReport({ apiKey: 'k', id: 'i' }, { lastUsedAtMs: undefined, perDay: {} }, 1, 0).lastUsedAt).toBeNull();
  });
});

describe('createUtcDayOf', () => {
  it('names the same day as utcDay at every instant, across midnights, forwards and backwards', () => {
    const dayOf = createUtcDayOf();
    const midnight = Date.parse('2026-03-10T00:00:00Z');
    const instants = [
      midnight - 1,
      midnight,
      midnight + 1,
      midnight + 86_399_999,
      midnight + 86_400_000,
      midnight - 86_400_000 * 3 + 5,
      0,
      -1,
      midnight + 1,
    ];
    for (const ms of instants) expect(dayOf(ms), String(ms)).toBe(utcDay(ms));
  });
});
