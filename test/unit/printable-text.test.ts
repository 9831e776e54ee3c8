import { describe, expect, it } from 'vitest';
import { escapeUnprintable, hasUnprintable, PRINTABLE_RULE } from '../../src/keys/printable-text.js';

/** The text rule for labels and reasons: what is refused on the way in and escaped on the way out. */
const REFUSED: Array<[string, string]> = [
  ['NUL', '\u0000'],
  ['BEL', '\u0007'],
  ['TAB', '\t'],
  ['LF', '\n'],
  ['CR', '\r'],
  ['ESC (a colour, a cleared screen)', '\u001b[2J'],
  ['US (last C0)', '\u001f'],
  ['DEL', '\u007f'],
  ['first C1 (PAD)', '\u0080'],
  ['NEL', '\u0085'],
  ['CSI (C1)', '\u009b'],
  ['last C1 (APC)', '\u009f'],
  ['LRE', '\u202a'],
  ['RLE', '\u202b'],
  ['PDF', '\u202c'],
  ['LRO', '\u202d'],
  ['RLO', '\u202e'],
  ['LRI', '\u2066'],
  ['RLI', '\u2067'],
  ['FSI', '\u2068'],
  ['PDI', '\u2069'],
];

const ALLOWED: Array<[string, string]> = [
  ['ASCII with punctuation', 'billing job #2 (eu-west) - "prod"'],
  ['space and tilde', ' ~ '],
  ['Latin-1 letters (just past C1)', 'caf\u00e9 \u00a0\u00ff'],
  ['CJK and emoji', '\u8acb\u6c42 \u{1f511}'],
  ['Arabic text (bidi by its letters, no override)', '\u0645\u0641\u062a\u0627\u062d'],
  ['the bidi marks LRM/RLM, which reorder nothing on their own', '\u200e\u200f'],
  ['just around the overrides', '\u2029\u202f\u2065\u206a'],
];

describe('printable text', () => {
  it.each(REFUSED)('refuses %s', (_name, c) => {
    expect(hasUnprintable(`label ${c} end`)).toBe(true);
    const escaped = escapeUnprintable(`a${c}b`);
    expect(hasUnprintable(escaped)).toBe(false);
    expect(escaped).toMatch(/^a(\\u[0-9a-f]{4})+/);
    // Escaped inside a JSON string it is still valid JSON, meaning the same text.
    expect(JSON.parse(escapeUnprintable(JSON.stringify(`a${c}b`)))).toBe(`a${c}b`);
  });

  it.each(ALLOWED)('allows %s, printed as it is', (_name, text) => {
    expect(hasUnprintable(text)).toBe(false);
    expect(escapeUnprintable(text)).toBe(text);
  });

  it('names what it refuses', () => {
    expect(PRINTABLE_RULE).toMatch(/C0.*DEL.*C1.*U\+202A.*U\+2066/);
  });
});
