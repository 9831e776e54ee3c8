/**
 * A fast reader for the YAML that keys files are written in, by people and by tools: block mappings
 * and sequences, flow sequences and mappings (`[a, b]`, `{ k: v }`, nested, on one line or spread over
 * several), one-line scalars (plain, 'single' or "double" quoted), comments. The `yaml` package
 * builds a concrete syntax tree and a document of nodes before the data: 100,000 keys took it about
 * 10 s and 1 GB (docs/performance.md, Scale). This reads the same text line by line into the data
 * directly.
 *
 * It gives exactly what `yaml`'s parse gives (YAML 1.2 core schema), or `undefined` when the text
 * uses anything outside that subset (anchors, tags, block or multi-line scalars, tabs, duplicate
 * keys, a scalar the core schema reads as null, a boolean or a number other than a plain decimal,
 * an escape JSON does not share, bytes that are not UTF-8, ...): the caller then parses it with
 * `yaml`, which also reports every syntax error. Declining is always safe, so anything doubtful is
 * declined. test/unit/flat-yaml.test.ts compares the two on random documents.
 */
import { isUtf8 } from 'node:buffer';

/** Thrown inside the reader when the text leaves the subset; never escapes parseFlatYaml. */
class Declined extends Error {}

/** A plain scalar the core schema reads as something else than a string (null, bool, int, float). */
const CORE_NOT_STRING =
  /^(?:~|[Nn]ull|NULL|[Tt]rue|TRUE|[Ff]alse|FALSE|[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN|[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?)?$/;
/** The only numbers read here: a decimal that fits a double exactly (yaml parses it the same way). */
const SMALL_INT = /^(?:0|[1-9][0-9]{0,14})$/;
/** A mapping key: a plain word followed by ": " or the line's end. Anything fancier is declined. */
const KEY = /^([A-Za-z_][A-Za-z0-9_-]*):(?: +|$)/;
/** Characters that may not start a plain scalar (YAML c-indicator), "-", "?" and ":" handled apart. */
const INDICATOR = /^[,[\]{}#&*!|>'"%@`]/;
/** Control characters (tab included), a BOM and the characters YAML 1.1 took as line breaks: declined. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNSUPPORTED_CHAR = /[\x00-\x09\x0b-\x1f\x7f\x85\u2028\u2029\ufeff]/;

/** Strings of at least this length made by slice() keep the whole line alive (V8 sliced strings). */
const SLICE_MIN = 13;

interface Line {
  /** The text after the indentation, up to the line's end. */
  text: string;
  /** Columns of indentation (spaces). */
  indent: number;
  /** Byte offset in the buffer of `text`'s first character, and whether the line is all ASCII. */
  byteStart: number;
  ascii: boolean;
}

/**
 * The data the text holds, or undefined when it is outside the subset (see above). `buf` is the
 * file's bytes: values are decoded from it directly, so no record keeps a slice of a large string.
 */
export function parseFlatYaml(buf: Buffer): unknown {
  if (buf.length === 0 || buf[0] === 0xef) return undefined; // empty, or a BOM
  // Not text: readDataFile refuses such a file before either reader sees it; declined here as well,
  // since `copy` below takes a line whose characters match its bytes one for one as ASCII.
  if (!isUtf8(buf)) return undefined;
  try {
    return read(buf);
  } catch (err) {
    if (err instanceof Declined) return undefined;
    throw err;
  }
}

function decline(): never {
  throw new Declined('outside the flat subset');
}

function read(buf: Buffer): unknown {
  const lines = new Lines(buf);
  lines.advance();
  const first = lines.line;
  if (!first) decline();
  const value = readBlock(lines, first, -1);
  if (lines.line) decline();
  return value;
}

/** The buffer's lines with content, one at a time, and copies of their characters. */
class Lines {
  /** KEY at a given column (set lastIndex), without slicing the line first; sticky, so one per read. */
  readonly KEY_AT = /([A-Za-z_][A-Za-z0-9_-]*):(?: +|$)/y;
  /** The current line; undefined past the last one. A reader may replace it with a part of itself. */
  line: Line | undefined;
  private pos = 0;

  constructor(private readonly buf: Buffer) {}

  /** Moves to the next line with content (blank and comment-only lines skipped). */
  advance(): void {
    const buf = this.buf;
    let pos = this.pos;
    this.line = undefined;
    while (pos < buf.length) {
      let end = buf.indexOf(10, pos);
      if (end < 0) end = buf.length;
      const next = end + 1;
      if (end > pos && buf[end - 1] === 13) end--; // CRLF
      let indent = 0;
      while (pos + indent < end && buf[pos + indent] === 32) indent++;
      const byteStart = pos + indent;
      pos = next;
      if (byteStart === end) continue;
      const text = buf.toString('utf8', byteStart, end);
      if (UNSUPPORTED_CHAR.test(text)) decline();
      if (text[0] === '#') continue;
      if (indent === 0 && (text.startsWith('---') || text.startsWith('...'))) decline();
      this.line = { text, indent, byteStart, ascii: text.length === end - byteStart };
      break;
    }
    this.pos = pos;
  }

  /** The characters [from, to) of line `l` as a string of its own (see SLICE_MIN). */
  copy(l: Line, from: number, to: number): string {
    return to - from >= SLICE_MIN && l.ascii
      ? this.buf.toString('latin1', l.byteStart + from, l.byteStart + to)
      : l.text.slice(from, to);
  }
}

const isDash = (l: Line) => l.text[0] === '-' && (l.text.length === 1 || l.text[1] === ' ');
const isFlowStart = (l: Line) => l.text[0] === '[' || l.text[0] === '{';

// The block reader: mappings and sequences laid out by indentation, one entry a line.

/** A node that starts a line: a block collection, or a flow one (`parent`: the indentation it sits in). */
function readBlock(lines: Lines, l: Line, parent: number): unknown {
  if (isFlowStart(l)) {
    const value = valueAt(lines, l, 0, parent);
    lines.advance();
    return value;
  }
  return isDash(l) ? sequence(lines, l.indent) : mapping(lines, l.indent);
}

/** The value after "key:" or "- " that was empty on its line: a nested block, or null. */
function nested(lines: Lines, n: number, dashAllowedAtSameIndent: boolean): unknown {
  lines.advance();
  const l = lines.line;
  if (l && (l.indent > n || (dashAllowedAtSameIndent && l.indent === n && isDash(l)))) return readBlock(lines, l, n);
  return null;
}

function sequence(lines: Lines, n: number): unknown[] {
  const out: unknown[] = [];
  const KEY_AT = lines.KEY_AT;
  for (let l = lines.line; l && l.indent === n && isDash(l); l = lines.line) {
    let at = 1;
    while (l.text[at] === ' ') at++;
    if (at >= l.text.length || l.text[at] === '#') {
      if (l.text[at] === '#' && l.text[at - 1] !== ' ') decline();
      out.push(nested(lines, n, false));
    } else if (((KEY_AT.lastIndex = at), KEY_AT.test(l.text))) {
      // "- key: value": a mapping whose keys sit at this column. The line is re-read from there.
      // The characters before `at` ("-" and spaces) are one byte each, so the byte offset holds.
      lines.line = { text: l.text.slice(at), indent: n + at, byteStart: l.byteStart + at, ascii: l.ascii };
      out.push(mapping(lines, n + at));
    } else {
      out.push(valueAt(lines, l, at, n));
      lines.advance();
    }
  }
  const l = lines.line;
  if (l && l.indent > n) decline();
  return out;
}

function mapping(lines: Lines, n: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let l = lines.line; l && l.indent === n; l = lines.line) {
    const m = KEY.exec(l.text);
    if (!m) decline();
    const key = m[1]!;
    if (key === '__proto__' || CORE_NOT_STRING.test(key) || Object.hasOwn(out, key)) decline();
    const at = m[0].length;
    if (at >= l.text.length || l.text[at] === '#') out[key] = nested(lines, n, true);
    else {
      out[key] = valueAt(lines, l, at, n);
      lines.advance();
    }
  }
  const l = lines.line;
  if (l && l.indent > n) decline();
  return out;
}

/**
 * A value written from column `at` of line `l` (a trailing comment allowed): a scalar, or a flow
 * collection, which may end on a later line (`lines.line` is then that line). `n`: the indentation of the
 * block the value belongs to (-1 for the document), which a flow collection's lines must exceed.
 */
function valueAt(lines: Lines, l: Line, at: number, n: number): unknown {
  const c = l.text[at];
  if (c === '[' || c === '{') {
    const { value, end } = readFlow(lines, l, at, n);
    rest(lines.line!, end);
    return value;
  }
  const { value, end } = readScalar(lines, l, at, false);
  rest(l, end);
  return value;
}

/** After a value: only spaces, then nothing or a comment. */
function rest(l: Line, from: number): void {
  let i = from;
  while (l.text[i] === ' ') i++;
  if (i < l.text.length && !(l.text[i] === '#' && i > from)) decline();
}

// The scalar reader: one plain, 'single' or "double" quoted scalar on one line.

/**
 * One scalar starting at `at`; `inFlow`: inside [ ] or { }, where , [ ] { } end a plain scalar.
 * Returns the value and the column just after it.
 */
function readScalar(lines: Lines, l: Line, at: number, inFlow: boolean): { value: unknown; end: number } {
  const t = l.text;
  if (t[at] === "'") {
    let i = at + 1;
    let doubled = false;
    for (;;) {
      const q = t.indexOf("'", i);
      if (q < 0) decline();
      if (t[q + 1] === "'") {
        doubled = true;
        i = q + 2;
        continue;
      }
      const value = doubled ? t.slice(at + 1, q).replaceAll("''", "'") : lines.copy(l, at + 1, q);
      return { value, end: q + 1 };
    }
  }
  if (t[at] === '"') {
    let i = at + 1;
    let escaped = false;
    while (i < t.length && t[i] !== '"') {
      if (t[i] === '\\') {
        // Only the escapes JSON shares with YAML, which mean the same in both.
        if (!/["\\/bfnrtu]/.test(t[i + 1] ?? '')) decline();
        escaped = true;
        i += 2;
      } else i++;
    }
    if (i >= t.length) decline();
    const value = escaped ? (JSON.parse(t.slice(at, i + 1)) as string) : lines.copy(l, at + 1, i);
    return { value, end: i + 1 };
  }
  const c = t[at] ?? '';
  // "-", "?" and ":" start a plain scalar (an IPv6 "::1") only before a character that could continue one.
  if (INDICATOR.test(c) || ('-?:'.includes(c) && /^$|^[ ,[\]{}#]/.test(t[at + 1] ?? ''))) decline();
  let end = at;
  for (; end < t.length; end++) {
    const ch = t[end];
    if (ch === ':' && (end + 1 === t.length || t[end + 1] === ' ' || (inFlow && /[,[\]{}]/.test(t[end + 1]!)))) break;
    if (ch === '#' && t[end - 1] === ' ') break;
    if (inFlow && (ch === ',' || ch === '[' || ch === ']' || ch === '{' || ch === '}')) break;
  }
  if (t[end] === ':') decline(); // "a: b: c", or a flow pair where a scalar was expected
  let last = end;
  while (last > at && t[last - 1] === ' ') last--;
  const text = lines.copy(l, at, last);
  if (CORE_NOT_STRING.test(text)) {
    if (!SMALL_INT.test(text)) decline();
    return { value: Number(text), end: last };
  }
  return { value: text, end: last };
}

// The flow reader: [ ] and { } collections, on one line or spread over several.

/**
 * A flow sequence ([a, b]) or mapping ({ k: v, "q": w }) starting at column `at` of line `start`, of
 * scalars and flow collections, spread over any number of lines. Its lines must be indented more
 * than `n`, the block it sits in, except a line that starts by closing the outermost collection,
 * which may sit at `n`: `yaml`'s lexer allows that one bracket only (flowLevel 1), and refuses a
 * line at `n` that closes a nested one (`a: [ [` then `] ]`). A scalar may not continue onto the next line, a key and its value
 * must be on one line, and entries are separated by commas (one trailing comma allowed): anything
 * else is declined. Returns the value and the column just after it, on the line it ended on.
 */
function readFlow(lines: Lines, start: Line, at: number, n: number): { value: unknown; end: number } {
  const KEY_AT = lines.KEY_AT;
  let l = start;
  let t = l.text;
  let i = at;
  /** How many collections are open: a line at `n` may only close the last one. */
  let depth = 0;
  /** To the next token: over spaces, a comment, line ends and blank or comment lines. */
  const skip = () => {
    for (;;) {
      while (t[i] === ' ') i++;
      if (i < t.length && t[i] !== '#') return;
      if (t[i] === '#' && t[i - 1] !== ' ') decline();
      lines.advance();
      const next = lines.line;
      if (!next) decline();
      const closesOutermost = depth === 1 && (next.text[0] === ']' || next.text[0] === '}');
      if (next.indent < n || (next.indent === n && !closesOutermost)) decline();
      l = next;
      t = l.text;
      i = 0;
    }
  };
  const value = (): unknown => {
    const c = t[i];
    if (c === '[' || c === '{') return collection();
    if (c === ',' || c === ']' || c === '}') decline();
    const s = readScalar(lines, l, i, true);
    i = s.end;
    return s.value;
  };
  /** A key and its ":" (a plain word, or a quoted scalar, which ":" may follow without a space). */
  const key = (map: Record<string, unknown>): string => {
    let k: string;
    if (t[i] === '"' || t[i] === "'") {
      const s = readScalar(lines, l, i, true);
      k = s.value as string;
      i = s.end;
      while (t[i] === ' ') i++;
      if (t[i] !== ':') decline();
      i++;
      while (t[i] === ' ') i++;
    } else {
      KEY_AT.lastIndex = i;
      const m = KEY_AT.exec(t);
      if (!m) decline();
      k = m[1]!;
      if (CORE_NOT_STRING.test(k)) decline();
      i += m[0].length;
    }
    // The value on the next line, or none ("k:" then "," or "}"): declined.
    if (i >= t.length || t[i] === '#') decline();
    if (k === '__proto__' || Object.hasOwn(map, k)) decline();
    return k;
  };
  const collection = (): unknown => {
    const close = t[i] === '[' ? ']' : '}';
    const list: unknown[] = [];
    const map: Record<string, unknown> = {};
    const done = (): unknown => {
      depth--;
      return close === ']' ? list : map;
    };
    depth++;
    i++;
    skip();
    if (t[i] === close) {
      i++;
      return done();
    }
    for (;;) {
      if (close === ']') list.push(value());
      else {
        const k = key(map);
        map[k] = value();
      }
      skip();
      if (t[i] === ',') {
        i++;
        skip();
        if (t[i] !== close) continue;
      }
      if (t[i] === close) {
        i++;
        return done();
      }
      decline();
    }
  };
  const value0 = collection();
  return { value: value0, end: i };
}
