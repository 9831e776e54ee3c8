import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createKnownKeys } from '../../src/store/redis/known-keys.js';

describe("createKnownKeys (the Redis store's filter of names that may exist)", () => {
  it('never says "absent" for a name it was given', () => {
    const known = createKnownKeys({ capacity: 20_000 });
    const names = Array.from({ length: 20_000 }, (_, i) =>
      i % 2 ? `kg_${randomBytes(16).toString('hex')}` : `key-${i}`,
    );
    for (const n of names) known.add(n);
    expect(names.filter((n) => !known.mayHave(n))).toEqual([]);
    expect(known.added).toBe(20_000);
  });

  it('says "absent" for almost every name it was not given, at capacity (about 1% false positives)', () => {
    const known = createKnownKeys({ capacity: 20_000 });
    for (let i = 0; i < 20_000; i++) known.add(`key-${i}`);
    let maybe = 0;
    for (let i = 0; i < 20_000; i++) if (known.mayHave(`kg_${randomBytes(16).toString('hex')}`)) maybe++;
    // 10 bits and 7 probes per name: 0.8% expected; 2% leaves room for chance, not for a broken hash.
    expect(maybe / 20_000).toBeLessThan(0.02);
    // Names that differ in one character (the bench's key-N, a client's sequence) spread as well.
    let near = 0;
    for (let i = 20_000; i < 40_000; i++) if (known.mayHave(`key-${i}`)) near++;
    expect(near / 20_000).toBeLessThan(0.02);
  });

  it('an empty filter knows nothing; its size follows the capacity (10 bits a name)', () => {
    const known = createKnownKeys({ capacity: 1_000_000 });
    expect(known.mayHave('anything')).toBe(false);
    expect(known.bytes).toBe(1_250_000);
    expect(createKnownKeys({ capacity: 0 }).bytes).toBe(8);
  });
});
