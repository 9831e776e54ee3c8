import { randomInt } from 'node:crypto';

/**
 * The embedded store's replay guard: every nonce admitted in the last TTL, per key, as numbers in
 * typed arrays grouped in buckets by expiry time, not as strings in a Map.
 *
 * Why: at 1,500 req/s and a 65 s TTL the guard holds about 100,000 entries. As "apiKey\0nonce"
 * strings in a Map each entry was a ~55-character string plus a Map entry in
 * the JavaScript heap, copied by every scavenge until promoted, marked by every full collection,
 * and walked entry by entry by a sweep every 10 s. Here an entry is 28 bytes in typed arrays,
 * which the collector never scans, and expiry drops a whole bucket at once.
 *
 * Layout: a nonce as the contract's decimal string (what decodeToken hands on: no leading zeros,
 * at most 20 digits) splits exactly into two integers below 10^10 (`hi`, `lo`), both exact in a
 * double; the key is a small integer (`keyIndex`, one per apiKey seen). A bucket holds the entries
 * whose expiry falls in one slot of `width` ms (width = the smallest BASE_WIDTH_MS × 2^n with
 * 8 × width ≥ the entry's TTL, so a lookup probes about 9 buckets of each TTL class in use), in an
 * open-addressing table with linear probing that doubles at half full and never deletes inside
 * itself. A bucket is dropped whole once its slot has ended: every entry in it has expired.
 *
 * Guarantees (the same as the Map's; test/unit/nonce-table.test.ts checks them against a reference
 * set): a (key, nonce) pair is admitted once while an earlier admission's expiry is in the future
 * (`expiry > now` is a replay, exactly as before), and admitted again after; an entry is kept at
 * most TTL + width ≤ 1.25 × TTL + BASE_WIDTH_MS, so memory is bounded by rate × that. A nonce
 * outside the decimal form (the store contract admits any string) goes to a small Map with the same
 * rule, swept with the buckets.
 *
 * The probe sequence starts from a hash seeded per process, so a key holder cannot precompute
 * nonces that pile onto one chain.
 */
export interface NonceTable {
  /** Records the nonce and returns true if it is not held with an expiry after `nowMs`; false = a replay. */
  admitOnce(apiKey: string, nonce: string, ttlMs: number, nowMs: number): boolean;
  /** Drops every bucket whose slot has ended and every expired odd-form entry. */
  sweep(nowMs: number): void;
  /** Entries held, including expired ones whose bucket has not ended yet. */
  size(): number;
}

/** The narrowest bucket, in ms. */
export const BASE_WIDTH_MS = 1_024;
const INITIAL_CAPACITY = 1_024;
const DECIMAL = /^(?:0|[1-9]\d{0,19})$/;
const SPLIT = 10; // digits in `lo`: both halves < 10^10 < 2^53

interface Bucket {
  readonly end: number; // ms: the slot's end; past it every entry has expired
  readonly key: number; // its key in `buckets`
  mask: number;
  count: number;
  hi: Float64Array;
  lo: Float64Array;
  keyIdx: Int32Array; // keyIndex + 1; 0 = empty slot
  exp: Float64Array;
}

export function createNonceTable(): NonceTable {
  const seed = randomInt(1, 0x7fffffff);
  const keyIndexes = new Map<string, number>();
  const buckets = new Map<number, Bucket>();
  let live: Bucket[] = [];
  let nextEnd = Infinity; // the earliest bucket end: nothing to drop before it
  const odd = new Map<string, number>(); // "apiKey\0nonce" -> expiry, for nonces outside the decimal form

  function hash(hi: number, lo: number, k: number): number {
    let h = Math.imul((lo >>> 0) ^ seed, 0x9e3779b1);
    h ^= Math.imul(Math.floor(lo / 4294967296) + (hi >>> 0) * 3, 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 15) ^ Math.imul(k, 0xc2b2ae35), 0x27d4eb2f);
    return h ^ (h >>> 13);
  }

  function widthFor(ttlMs: number): number {
    let width = BASE_WIDTH_MS;
    while (width * 8 < ttlMs) width *= 2;
    return width;
  }

  function newBucket(end: number, key: number, capacity: number): Bucket {
    return {
      end,
      key,
      mask: capacity - 1,
      count: 0,
      hi: new Float64Array(capacity),
      lo: new Float64Array(capacity),
      keyIdx: new Int32Array(capacity),
      exp: new Float64Array(capacity),
    };
  }

  /** Where (hi, lo, k) sits in `b`, or the empty slot where it would go (then keyIdx[i] === 0). */
  function probe(b: Bucket, hi: number, lo: number, k: number, h: number): number {
    let i = h & b.mask;
    for (;;) {
      const at = b.keyIdx[i] as number;
      if (at === 0 || (at === k && b.lo[i] === lo && b.hi[i] === hi)) return i;
      i = (i + 1) & b.mask;
    }
  }

  function put(b: Bucket, hi: number, lo: number, k: number, exp: number) {
    const i = probe(b, hi, lo, k, hash(hi, lo, k));
    if (b.keyIdx[i] === 0) b.count++;
    b.hi[i] = hi;
    b.lo[i] = lo;
    b.keyIdx[i] = k;
    b.exp[i] = exp;
  }

  function grow(b: Bucket) {
    const old = { hi: b.hi, lo: b.lo, keyIdx: b.keyIdx, exp: b.exp };
    const capacity = (b.mask + 1) * 2;
    b.mask = capacity - 1;
    b.count = 0;
    b.hi = new Float64Array(capacity);
    b.lo = new Float64Array(capacity);
    b.keyIdx = new Int32Array(capacity);
    b.exp = new Float64Array(capacity);
    for (let i = 0; i < old.keyIdx.length; i++) {
      const k = old.keyIdx[i] as number;
      if (k !== 0) put(b, old.hi[i] as number, old.lo[i] as number, k, old.exp[i] as number);
    }
  }

  function sweep(nowMs: number) {
    if (nowMs >= nextEnd) {
      for (const b of live) if (b.end <= nowMs) buckets.delete(b.key);
      live = live.filter((b) => b.end > nowMs);
      nextEnd = live.reduce((min, b) => Math.min(min, b.end), Infinity);
    }
    for (const [k, exp] of odd) if (exp <= nowMs) odd.delete(k);
  }

  function admitOdd(apiKey: string, nonce: string, ttlMs: number, nowMs: number): boolean {
    const k = `${apiKey}\0${nonce}`;
    const exp = odd.get(k);
    if (exp !== undefined && exp > nowMs) return false;
    odd.set(k, nowMs + ttlMs);
    return true;
  }

  return {
    admitOnce(apiKey, nonce, ttlMs, nowMs) {
      if (!DECIMAL.test(nonce)) return admitOdd(apiKey, nonce, ttlMs, nowMs);
      if (nowMs >= nextEnd) sweep(nowMs);
      let k = keyIndexes.get(apiKey);
      if (k === undefined) keyIndexes.set(apiKey, (k = keyIndexes.size + 1));
      // The two halves read digit by digit: no substring per request.
      const cut = nonce.length - SPLIT;
      let hi = 0;
      let lo = 0;
      for (let i = 0; i < nonce.length; i++) {
        const digit = nonce.charCodeAt(i) - 48;
        if (i < cut) hi = hi * 10 + digit;
        else lo = lo * 10 + digit;
      }
      const h = hash(hi, lo, k);
      for (const b of live) {
        const i = probe(b, hi, lo, k, h);
        if (b.keyIdx[i] !== 0 && (b.exp[i] as number) > nowMs) return false;
      }
      const exp = nowMs + ttlMs;
      const width = widthFor(ttlMs);
      const slot = Math.floor(exp / width);
      const key = slot * 64 + Math.log2(width / BASE_WIDTH_MS);
      let b = buckets.get(key);
      if (b === undefined) {
        b = newBucket((slot + 1) * width, key, INITIAL_CAPACITY);
        buckets.set(key, b);
        live.push(b);
        nextEnd = Math.min(nextEnd, b.end);
      }
      if ((b.count + 1) * 2 > b.mask + 1) grow(b);
      put(b, hi, lo, k, exp);
      return true;
    },
    sweep,
    size() {
      let n = odd.size;
      for (const b of live) n += b.count;
      return n;
    },
  };
}
