import { describe, expect, it } from 'vitest';
import { newRequestId } from '../../src/pipeline/request-id.js';
import { requestIdOf } from '../../src/pipeline/forward-headers.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newRequestId', () => {
  it('is a version 4 UUID as crypto.randomUUID() writes it, never the same twice, across pool refills', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2_000; i++) {
      const id = newRequestId();
      expect(id).toMatch(UUID_V4);
      seen.add(id);
    }
    expect(seen.size).toBe(2_000);
  });

  it('uses every hex digit in every random position (not a fixed or short pattern)', () => {
    const digits = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 2_000; i++) [...newRequestId()].forEach((c, at) => digits[at]?.add(c));
    const counts = digits.map((d) => d.size);
    for (const at of [8, 13, 18, 23]) expect(counts[at]).toBe(1); // the dashes
    expect(counts[14]).toBe(1); // the version
    expect(counts[19]).toBe(4); // the variant: 8, 9, a, b
    for (let at = 0; at < 36; at++)
      if (![8, 13, 14, 18, 19, 23].includes(at)) expect(counts[at], `position ${at}`).toBe(16);
  });

  it('is what a request without a usable X-Request-Id gets', () => {
    expect(requestIdOf(undefined)).toMatch(UUID_V4);
    expect(requestIdOf('bad id with spaces')).toMatch(UUID_V4);
    expect(requestIdOf('client-id-1')).toBe('client-id-1');
  });
});
