import { describe, expect, it } from 'vitest';
import { REASONS } from '../../src/errors.js';
import {
  addToRings,
  bucketOf,
  createPendingFieldsOf,
  mergeRings,
  FORWARDED,
  OUTCOMES,
  outcomeOf,
  outcomeReport,
  parseGranularity,
  parseOutcomeHash,
  pendingField,
  RING_SLOTS,
  RINGS,
  type RingSlot,
} from '../../src/keys/outcome-usage.js';

describe('outcomeOf: the bucket of a verified request, by its recorded reason', () => {
  it.each([
    [undefined, true, 'forwarded'],
    [undefined, false, undefined], // no answer at all (the client went away)
    ['upstream_timeout', false, 'forwarded'],
    ['upstream_error', false, 'forwarded'],
    ['upstream_busy', false, 'forwarded'],
    ['upstream_bad_response', false, 'forwarded'],
    ['replay', false, 'replay'],
    ['rate_limited', false, 'rate_limited'],
    ['owner_rate_limited', false, 'rate_limited'],
    ['credits_exhausted', false, 'credits_exhausted'], // by name: the reason the credits work adds
    ['scope_denied', false, 'other_refusals'],
    ['ip_denied', false, 'other_refusals'],
    ['fenced', false, 'other_refusals'],
    ['binding_mismatch', false, 'other_refusals'],
    ['cost_exceeds_burst', false, 'other_refusals'],
  ] as const)('%s (passed: %s) → %s', (reason, passed, name) => {
    const o = outcomeOf(reason, passed);
    expect(o === undefined ? undefined : OUTCOMES[o]).toBe(name);
  });

  it('every reason of the catalogue falls in a bucket', () => {
    for (const reason of Object.keys(REASONS)) expect(outcomeOf(reason, false)).toBeDefined();
  });
});

describe('granularities and rings', () => {
  it.each([
    ['minute', 'minute'],
    ['hour', 'hour'],
    ['day', 'day'],
    ['Minute', undefined],
    ['week', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('parseGranularity(%j) → %s', (raw, want) => {
    expect(parseGranularity(raw)).toBe(want);
  });

  it('a ring keeps 24 hours of minutes, 30 days of hours, 365 days: 2,525 slots at most', () => {
    expect([RINGS.minute.size * 1, RINGS.hour.size, RINGS.day.size]).toEqual([1_440, 720, 365]);
    expect(RING_SLOTS).toBe(2_525);
  });

  it('the pending field names are built once per minute, not per request', () => {
    const fieldsOf = createPendingFieldsOf();
    const t = Date.UTC(2026, 0, 1, 12, 30, 10);
    const a = fieldsOf(t);
    expect(fieldsOf(t + 49_000)).toBe(a);
    expect(a[FORWARDED]).toEqual([
      pendingField('minute', bucketOf(t, 'minute'), FORWARDED),
      pendingField('hour', bucketOf(t, 'hour'), FORWARDED),
      pendingField('day', bucketOf(t, 'day'), FORWARDED),
    ]);
    expect(fieldsOf(t + 50_000)).not.toBe(a); // 12:31:00
  });

  it('addToRings: a newer bucket replaces its slot, an older one is dropped, the same one adds', () => {
    const rings = new Map<string, RingSlot>();
    addToRings(rings, pendingField('minute', 1_440 * 7 + 5, 0), 2);
    addToRings(rings, pendingField('minute', 1_440 * 7 + 5, 2), 1);
    expect(rings.get('m5')).toEqual({ bucket: 1_440 * 7 + 5, counts: [2, 0, 1, 0, 0] });
    addToRings(rings, pendingField('minute', 1_440 * 6 + 5, 0), 9); // a day older: gone
    expect(rings.get('m5')).toEqual({ bucket: 1_440 * 7 + 5, counts: [2, 0, 1, 0, 0] });
    addToRings(rings, pendingField('minute', 1_440 * 8 + 5, 1), 1); // a day newer: replaces
    expect(rings.get('m5')).toEqual({ bucket: 1_440 * 8 + 5, counts: [0, 1, 0, 0, 0] });
    expect(rings.size).toBe(1);
  });

  it('mergeRings: the same bucket in several regions adds up, a newer bucket wins its slot', () => {
    const a = new Map<string, RingSlot>([
      ['m5', { bucket: 100, counts: [1, 0, 2, 0, 0] }],
      ['h1', { bucket: 7, counts: [5, 0, 0, 0, 0] }],
    ]);
    const b = new Map<string, RingSlot>([
      ['m5', { bucket: 100, counts: [3, 1, 0, 0, 1] }],
      ['h1', { bucket: 6, counts: [9, 9, 9, 9, 9] }],
      ['d2', { bucket: 2, counts: [1, 1, 1, 1, 1] }],
    ]);
    const merged = mergeRings([a, b]);
    expect(merged.get('m5')).toEqual({ bucket: 100, counts: [4, 1, 2, 0, 1] });
    expect(merged.get('h1')).toEqual({ bucket: 7, counts: [5, 0, 0, 0, 0] });
    expect(merged.get('d2')).toEqual({ bucket: 2, counts: [1, 1, 1, 1, 1] });
    expect(mergeRings([b, a]).get('h1')).toEqual({ bucket: 7, counts: [5, 0, 0, 0, 0] });
  });

  it('parseOutcomeHash reads the slots and skips batch marks and anything malformed', () => {
    const rings = parseOutcomeHash({ m5: '10085 2 0 1 0 0', h3: '7 1', 'b:abc': '4 1700000000000', d1: 'x 1', m9: '' });
    expect([...rings]).toEqual([
      ['m5', { bucket: 10085, counts: [2, 0, 1, 0, 0] }],
      ['h3', { bucket: 7, counts: [1, 0, 0, 0, 0] }],
    ]);
  });

  it('outcomeReport: every bucket of the window, oldest first, a slot of another bucket counted as empty', () => {
    const now = Date.UTC(2026, 0, 10, 6, 0, 0);
    const today = bucketOf(now, 'day');
    const rings = new Map<string, RingSlot>([
      [`d${today % 365}`, { bucket: today, counts: [5, 1, 0, 0, 2] }],
      [`d${(today - 1) % 365}`, { bucket: today - 1 - 365, counts: [9, 9, 9, 9, 9] }], // a year older
    ]);
    const r = outcomeReport(rings, 'day', now);
    expect(r.buckets).toHaveLength(365);
    expect(r.buckets.at(-1)).toEqual({
      start: '2026-01-10T00:00:00.000Z',
      forwarded: 5,
      replay: 1,
      rate_limited: 0,
      credits_exhausted: 0,
      other_refusals: 2,
    });
    expect(r.totals).toEqual({ forwarded: 5, replay: 1, rate_limited: 0, credits_exhausted: 0, other_refusals: 2 });
    expect([r.from, r.to, r.bucketSeconds]).toEqual(['2025-01-11T00:00:00.000Z', '2026-01-11T00:00:00.000Z', 86_400]);
  });
});
