import { isUtf8 } from 'node:buffer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { firstInvalidUtf8 } from '../../src/files/utf8-check.js';

const bytes = (...parts: Array<string | number[]>) =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : Buffer.from(p))));

describe('firstInvalidUtf8', () => {
  it.each<[string, Buffer, number]>([
    ['ASCII', bytes('keys: []\n'), -1],
    ['two-, three- and four-byte characters', bytes('é € 😀 \u{10ffff}'), -1],
    ['a BOM', bytes([0xef, 0xbb, 0xbf], 'a: 1\n'), -1],
    ['NUL, NEL, U+2028 (valid UTF-8; the readers decide about them)', bytes('a\u0000\u0085\u2028'), -1],
    ['empty', bytes(), -1],
    ['a Latin-1 é', bytes('caf', [0xe9], '-secret'), 3],
    ['a lone continuation byte', bytes('ab', [0x80]), 2],
    ['a truncated sequence at the end', bytes('ab', [0xe2, 0x82]), 2],
    ['a truncated sequence before ASCII', bytes('a', [0xe2, 0x82], 'b'), 1],
    ['an overlong two-byte form', bytes('a', [0xc0, 0xaf]), 1],
    ['an overlong three-byte form', bytes([0xe0, 0x80, 0xaf]), 0],
    ['an overlong four-byte form', bytes('xy', [0xf0, 0x80, 0x80, 0xaf]), 2],
    ['an encoded surrogate', bytes('é', [0xed, 0xa0, 0x80]), 2],
    ['above U+10FFFF', bytes([0xf4, 0x90, 0x80, 0x80]), 0],
    ['F5 to FF', bytes('a', [0xff]), 1],
    ['the first of two', bytes('a', [0xe9], 'b', [0xe9]), 1],
  ])('%s', (_name, buf, offset) => {
    expect(firstInvalidUtf8(buf)).toBe(offset);
  });

  it('on random bytes, agrees with the native check and stops where the valid prefix ends', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 24 }), (raw) => {
        const buf = Buffer.from(raw);
        const at = firstInvalidUtf8(buf);
        expect(at === -1).toBe(isUtf8(buf));
        if (at >= 0) {
          expect(isUtf8(buf.subarray(0, at))).toBe(true);
          // No valid character starts there: every extension of the prefix by 1 to 4 bytes from `at` fails.
          for (let k = 1; k <= 4 && at + k <= buf.length; k++) expect(isUtf8(buf.subarray(at, at + k))).toBe(false);
        }
      }),
      { numRuns: 2_000 },
    );
  });
});
