/**
 * Which API keys may exist, as a Bloom filter: `mayHave` is false only for a name never added, so a
 * token naming a random `sub` is answered "unknown key" without a Redis read (a flood of made-up
 * names costs Redis nothing),
 * while a false positive (about 1% at capacity) only costs the read that would have happened anyway.
 * Names are never removed (a deleted key stays "maybe": one read, as before). Filled and kept current
 * by the Redis store (redis-store.ts), which uses it only while its change subscription is confirmed.
 *
 * 10 bits and 7 probes per name of capacity: about 1% false positives when full; 1,000,000 keys of
 * capacity 2,000,000 take 2.5 MB. Past capacity the rate climbs, so the store rebuilds a larger one.
 */
export interface KnownKeys {
  add(apiKey: string): void;
  /** False: certainly never added. True: added, or a false positive. */
  mayHave(apiKey: string): boolean;
  /** Names added so far (with repeats). */
  readonly added: number;
  readonly capacity: number;
  /** Bytes of the bit array. */
  readonly bytes: number;
}

const BITS_PER_NAME = 10;
const PROBES = 7;

/** FNV-1a over the UTF-16 code units, from `seed`; 32 bits. */
function fnv1a(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // A final mix (murmur3's fmix32): FNV's low bits alone spread short, similar names poorly.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export function createKnownKeys(options: { capacity: number }): KnownKeys {
  const capacity = Math.max(1, Math.ceil(options.capacity));
  const bitCount = Math.max(64, capacity * BITS_PER_NAME);
  const bits = new Uint8Array(Math.ceil(bitCount / 8));
  let added = 0;
  // Double hashing (Kirsch–Mitzenmacher): probe i is h1 + i·h2, as good as 7 independent hashes here.
  return {
    add(apiKey) {
      added++;
      const h1 = fnv1a(apiKey, 0x811c9dc5);
      const h2 = fnv1a(apiKey, 0x9747b28c) | 1;
      for (let i = 0; i < PROBES; i++) {
        const bit = ((h1 + Math.imul(i, h2)) >>> 0) % bitCount;
        bits[bit >>> 3] = (bits[bit >>> 3] as number) | (1 << (bit & 7));
      }
    },
    mayHave(apiKey) {
      const h1 = fnv1a(apiKey, 0x811c9dc5);
      const h2 = fnv1a(apiKey, 0x9747b28c) | 1;
      for (let i = 0; i < PROBES; i++) {
        const bit = ((h1 + Math.imul(i, h2)) >>> 0) % bitCount;
        if (((bits[bit >>> 3] as number) & (1 << (bit & 7))) === 0) return false;
      }
      return true;
    },
    get added() {
      return added;
    },
    capacity,
    bytes: bits.length,
  };
}
