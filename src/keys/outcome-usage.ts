/**
 * Usage by outcome: how many of a key's (or an owner's) requests ended each way, per minute for the last
 * 24 hours, per hour for 30 days and per day for a year. Kept in fixed rings (one slot per bucket,
 * `bucket index % size`), so a key's memory is bounded however long it is used: a slot holds its bucket's
 * index and one count per outcome, and a newer bucket landing on the slot replaces it.
 *
 * Counted only for requests whose key signed them with a verified signature (the request path names the key
 * then, observe/request-record.ts): an unknown key or a bad signature counts nothing anywhere, so no caller
 * can make Keygate write rows for key names of its choosing.
 */

/**
 * The outcome buckets, in the order of a slot's counts (the order is stored: never reorder, only append):
 *   forwarded          passed every check and went to the upstream (forward-auth: allowed); counted whatever
 *                      the upstream then did, its failures (502/503/504 `upstream_*`) included
 *   replay             refused: the nonce was already used (reason `replay`)
 *   rate_limited       refused by the key's or its owner's rate budget (`rate_limited`, `owner_rate_limited`)
 *   credits_exhausted  refused: the key's or its owner's credits are spent (`credits_exhausted`)
 *   other_refusals     every other refusal of a request whose signature verified (scope, IP allow-list,
 *                      binding, fenced, a cost above the burst, …)
 */
export const OUTCOMES = Object.freeze([
  'forwarded',
  'replay',
  'rate_limited',
  'credits_exhausted',
  'other_refusals',
] as const);
export type OutcomeName = (typeof OUTCOMES)[number];
/** An outcome's index in OUTCOMES (what the stores count with). */
export type Outcome = 0 | 1 | 2 | 3 | 4;
export const FORWARDED: Outcome = 0;
export const REPLAYED: Outcome = 1;
export const RATE_LIMITED: Outcome = 2;
export const CREDITS_EXHAUSTED: Outcome = 3;
export const OTHER_REFUSAL: Outcome = 4;

const UPSTREAM_FAILURES: ReadonlySet<string> = new Set([
  'upstream_error',
  'upstream_bad_response',
  'upstream_busy',
  'upstream_timeout',
]);

/**
 * The bucket of a request whose signature verified, from its recorded answer: no reason and the OK code is
 * forwarded; undefined when it got no answer at all (the client went away first). Matched by the reason's
 * name, so a reason the catalogue gains later (credits_exhausted) needs no change here.
 */
export function outcomeOf(reason: string | undefined, passed: boolean): Outcome | undefined {
  if (reason === undefined) return passed ? FORWARDED : undefined;
  switch (reason) {
    case 'replay':
      return REPLAYED;
    case 'rate_limited':
    case 'owner_rate_limited':
      return RATE_LIMITED;
    case 'credits_exhausted':
      return CREDITS_EXHAUSTED;
    default:
      return UPSTREAM_FAILURES.has(reason) ? FORWARDED : OTHER_REFUSAL;
  }
}

export type Granularity = 'minute' | 'hour' | 'day';
export const GRANULARITIES: readonly Granularity[] = Object.freeze(['minute', 'hour', 'day'] as const);

/** Each ring: its bucket length, how many buckets it keeps (and a report shows) and its slots' field prefix. */
export const RINGS: Readonly<
  Record<Granularity, { readonly ms: number; readonly size: number; readonly tag: string }>
> = Object.freeze({
  minute: Object.freeze({ ms: 60_000, size: 1_440, tag: 'm' }),
  hour: Object.freeze({ ms: 3_600_000, size: 720, tag: 'h' }),
  day: Object.freeze({ ms: 86_400_000, size: 365, tag: 'd' }),
});

/** The most slots a subject's rings hold: its bounded size (one field per slot in Redis). */
export const RING_SLOTS = RINGS.minute.size + RINGS.hour.size + RINGS.day.size;

/** What a granularity must be; each caller puts its own name in front (--granularity, query.granularity). */
export const GRANULARITY_RULE = 'one of minute, hour, day';

export function parseGranularity(raw: string | undefined): Granularity | undefined {
  return raw !== undefined && (GRANULARITIES as readonly string[]).includes(raw) ? (raw as Granularity) : undefined;
}

/** A bucket's index: whole bucket lengths since the epoch (UTC: days start at 00:00 UTC). */
export const bucketOf = (ms: number, g: Granularity) => Math.floor(ms / RINGS[g].ms);

/**
 * The name of a pending count (in process, and the flush script's argument): `o<tag><bucket>:<outcome>`, e.g.
 * `om29512345:0`. The flush script turns it into the ring slot `<tag><bucket % size>`.
 */
export const pendingField = (g: Granularity, bucket: number, outcome: Outcome) =>
  `o${RINGS[g].tag}${bucket}:${outcome}`;

/**
 * The three pending field names (minute, hour, day) of each outcome at an instant, rebuilt only when the
 * minute changes: counting a request names no new string.
 */
export function createPendingFieldsOf(): (ms: number) => readonly (readonly string[])[] {
  let minute = -1;
  let fields: readonly (readonly string[])[] = [];
  return (ms) => {
    const m = Math.floor(ms / 60_000);
    if (m !== minute) {
      minute = m;
      fields = OUTCOMES.map((_, o) => GRANULARITIES.map((g) => pendingField(g, bucketOf(ms, g), o as Outcome)));
    }
    return fields;
  };
}

/** One ring slot: the bucket it holds and its count per outcome (OUTCOMES order). */
export interface RingSlot {
  readonly bucket: number;
  readonly counts: readonly number[];
}

/** A subject's rings as stored: slot field (`<tag><bucket % size>`) → slot. */
export type OutcomeRings = ReadonlyMap<string, RingSlot>;

/** A slot field's value as Redis keeps it: "<bucket> <count> <count> …"; undefined when it does not parse. */
export function parseSlot(value: string): RingSlot | undefined {
  const parts = value.split(' ');
  if (parts.length < 2 || !parts.every((p) => /^\d{1,16}$/.test(p))) return undefined;
  const counts = parts.slice(1, 1 + OUTCOMES.length).map(Number);
  while (counts.length < OUTCOMES.length) counts.push(0);
  return { bucket: Number(parts[0]), counts };
}

/** An outcomes hash (HGETALL) as rings: the slot fields; anything else (batch marks) is ignored. */
export function parseOutcomeHash(hash: Record<string, string>): OutcomeRings {
  const rings = new Map<string, RingSlot>();
  for (const [field, value] of Object.entries(hash)) {
    if (!/^[mhd]\d{1,4}$/.test(field)) continue;
    const slot = parseSlot(value);
    if (slot !== undefined) rings.set(field, slot);
  }
  return rings;
}

export type OutcomeCounts = Record<OutcomeName, number>;

const countsOf = (counts: readonly number[] | undefined): OutcomeCounts =>
  Object.fromEntries(OUTCOMES.map((name, i) => [name, counts?.[i] ?? 0])) as OutcomeCounts;

/**
 * The report of one subject's rings at a granularity: every bucket of its window, oldest first, ending with
 * the one `nowMs` falls in (a slot holding another bucket counts as empty), and the totals over them.
 */
export function outcomeReport(rings: OutcomeRings, g: Granularity, nowMs: number) {
  const { ms, size, tag } = RINGS[g];
  const last = bucketOf(nowMs, g);
  const buckets: Array<{ start: string } & OutcomeCounts> = [];
  const totals = countsOf(undefined);
  for (let b = last - size + 1; b <= last; b++) {
    const slot = rings.get(`${tag}${b % size}`);
    const counts = countsOf(slot?.bucket === b ? slot.counts : undefined);
    for (const name of OUTCOMES) totals[name] += counts[name];
    buckets.push({ start: new Date(b * ms).toISOString(), ...counts });
  }
  return {
    granularity: g,
    bucketSeconds: ms / 1000,
    from: new Date((last - size + 1) * ms).toISOString(),
    to: new Date((last + 1) * ms).toISOString(),
    outcomes: [...OUTCOMES],
    totals,
    buckets,
  };
}

/** Adds `n` of `outcome` to the ring slot of pending field `field` (the memory store; Redis does it in Lua). */
export function addToRings(rings: Map<string, RingSlot>, field: string, n: number): void {
  const m = /^o([mhd])(\d+):(\d)$/.exec(field);
  if (m === null) return;
  const [, tag, rawBucket, rawOutcome] = m as unknown as [string, string, string, string];
  const size = tag === 'm' ? RINGS.minute.size : tag === 'h' ? RINGS.hour.size : RINGS.day.size;
  const bucket = Number(rawBucket);
  const name = `${tag}${bucket % size}`;
  const slot = rings.get(name);
  if (slot !== undefined && slot.bucket > bucket) return; // a bucket older than the one the slot holds: gone
  const counts = slot !== undefined && slot.bucket === bucket ? [...slot.counts] : OUTCOMES.map(() => 0);
  counts[Number(rawOutcome)] = (counts[Number(rawOutcome)] ?? 0) + n;
  rings.set(name, { bucket, counts });
}

/**
 * Several stores' rings of one subject as one (regions: each region counts what its instances answered): a slot
 * holding the same bucket in several adds up; where they differ, the newer bucket is the one in its window.
 */
export function mergeRings(all: readonly OutcomeRings[]): OutcomeRings {
  const merged = new Map<string, RingSlot>();
  for (const rings of all)
    for (const [field, slot] of rings) {
      const seen = merged.get(field);
      if (seen === undefined || slot.bucket > seen.bucket) merged.set(field, slot);
      else if (slot.bucket === seen.bucket)
        merged.set(field, { bucket: slot.bucket, counts: seen.counts.map((n, i) => n + (slot.counts[i] ?? 0)) });
    }
  return merged;
}
