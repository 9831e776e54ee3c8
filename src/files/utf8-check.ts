import { isUtf8 } from 'node:buffer';

/**
 * The byte offset of the first sequence in `buf` that is not well-formed UTF-8 (RFC 3629: no overlong
 * forms, no surrogates U+D800-U+DFFF, nothing above U+10FFFF, no truncated sequence), or -1 when the
 * whole buffer is valid. A BOM (EF BB BF) is valid UTF-8 and passes.
 *
 * Why a file is refused whole rather than decoded with U+FFFD in place of bad bytes: two readers of
 * the same bytes (the fast YAML reader and the `yaml` package) did not replace them the same way, so
 * which secret a key had depended on an unrelated line elsewhere in the file. A file with one meaning
 * is one whose bytes are text.
 */
export function firstInvalidUtf8(buf: Uint8Array): number {
  // The whole-buffer check is native (simdutf) and fast; the byte loop below runs only to locate a
  // failure, so a valid file of any size costs a few milliseconds.
  if (isUtf8(buf)) return -1;
  let i = 0;
  while (i < buf.length) {
    const b = buf[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0; // overlong
      if (b === 0xed) hi = 0x9f; // a surrogate
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90; // overlong
      if (b === 0xf4) hi = 0x8f; // above U+10FFFF
    } else return i; // a continuation byte with no lead, C0/C1 (overlong) or F5-FF
    for (let k = 1; k <= need; k++) {
      const c = buf[i + k];
      if (c === undefined) return i;
      if (k === 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) return i;
    }
    i += need + 1;
  }
  return -1; // not reached when isUtf8 said no; kept for a total function
}
