import fc from 'fast-check';
import { expect } from 'vitest';
import { parse } from 'yaml';
import { parseFlatYaml } from '../../../src/files/flat-yaml.js';
import { firstInvalidUtf8 } from '../../../src/files/utf8-check.js';

/**
 * The differential properties of the fast YAML reader (src/files/flat-yaml.ts) against the `yaml`
 * package, shared by the unit tier (a few hundred documents: a smoke run) and the adversarial tier
 * (thousands: the search). Random documents in every style a keys file is written in: block mappings
 * and sequences nested at random (both sequence indentations), flow sequences and mappings nested in
 * them and in each other, on one line or spread over lines at random indentations, with values built
 * from the pieces that matter (quotes, brackets, "#", ":", "- ", escapes including lone surrogates,
 * numbers, core-schema words, NUL, U+2028/U+2029, NEL); random lines; and documents with bytes that
 * are not UTF-8. The fast reader must decline or agree with `yaml`, and decline whatever `yaml`
 * refuses; a document that is not UTF-8 it must decline, and readDataFile refuses it (utf8-check).
 */

/** What the `yaml` package reads, as readDataFile calls it. */
export const full = (text: string) =>
  parse(text, { maxAliasCount: 100, logLevel: 'error', prettyErrors: false }) as unknown;
export const flat = (text: string) => parseFlatYaml(Buffer.from(text, 'utf8'));

const word = fc.constantFrom('a', 'apiKey', 'k-1', 'x_y', 'true', 'null', '1', '0x1', '__proto__', 'é');
const piece = fc.constantFrom(
  ...[' ', '  ', '- ', ': ', ':', '#', ' #', '"', "'", "''", '\\', '\\"', '\\u00e9', '\\x41'],
  ...['[', ']', '{', '}', ', ', ',', '?', '|', '>', '&a', '*a', '!', '%', '@', '`', '~', '.', '-'],
  ...['10.0.0.0/8', '::1', 'http://h/p#f', '1.5', '-1', '007', '12345678901234567890', '.inf', 'TRUE', 'Null'],
);
const odd = fc.constantFrom(
  // Lone and paired surrogates in escapes, NUL, the Unicode line and paragraph separators, NEL, a BOM.
  ...['\\ud800', '\\udc00', '\\uD83D\\uDE00', '\\ud83d', '\\u0000', '\u0000', '\u2028', '\u2029', '\u0085'],
  ...['\\u2028', '\\N', '\\L', '\ufeff', '\t'],
);
// Mostly words, so that many documents are in the subset and the comparison is made, not declined;
// the odd characters (which mostly make the fast reader decline) in one text of about 20.
const pieces = (extra: fc.Arbitrary<string>) =>
  fc
    .array(
      fc.oneof(
        { arbitrary: word, weight: 6 },
        { arbitrary: fc.constantFrom(' ', '-', '.'), weight: 2 },
        { arbitrary: extra, weight: 1 },
      ),
      { minLength: 1, maxLength: 4 },
    )
    .map((p) => p.join(''));
const text = fc.oneof({ arbitrary: pieces(piece), weight: 19 }, { arbitrary: pieces(odd), weight: 1 });
const key = fc.oneof({ arbitrary: fc.constantFrom('a', 'b', 'apiKey', 'scopes', 'k-1', 'x_y'), weight: 9 }, word);

/** Between two tokens of a flow collection: mostly ", " on one line, sometimes a line break. */
const brk = fc.oneof(
  { arbitrary: fc.constantFrom(' ', ''), weight: 8 },
  fc.tuple(fc.nat({ max: 12 }), fc.constantFrom('', ' # c')).map(([n, c]) => `${c}\n${' '.repeat(n)}`),
);
const sep = fc.oneof(
  { arbitrary: fc.constant(', '), weight: 12 },
  { arbitrary: fc.constantFrom(',', ' , '), weight: 2 },
  { arbitrary: fc.constantFrom(',,', ',# c'), weight: 1 },
  { arbitrary: brk.map((b) => `,${b}`), weight: 2 },
  { arbitrary: brk.map((b) => `${b},`), weight: 1 },
);
type Flow = string | { seq: Flow[] } | { map: Array<[string, Flow]> };
const { flowNode } = fc.letrec<{ flowNode: Flow; flowSeq: Flow; flowMap: Flow }>((tie) => ({
  flowNode: fc.oneof(
    { depthSize: 'small' },
    { arbitrary: text, weight: 3 },
    text.map((t) => `'${t}'`),
    text.map((t) => `"${t}"`),
    tie('flowSeq'),
    tie('flowMap'),
  ),
  flowSeq: fc.array(tie('flowNode'), { maxLength: 4 }).map((seq) => ({ seq })),
  flowMap: fc
    .array(
      fc.tuple(
        fc.oneof(
          { arbitrary: key, weight: 4 },
          key.map((k) => `"${k}"`),
          key.map((k) => `'${k}'`),
        ),
        tie('flowNode'),
      ),
      { maxLength: 4 },
    )
    .map((map) => ({ map })),
}));
/** A flow node as text, with its separators, breaks, colons and trailing commas drawn at random. */
const flowText = fc
  .tuple(
    flowNode,
    fc.array(fc.tuple(sep, brk, fc.constantFrom(': ', ':', ' : ', ': '), fc.boolean()), {
      minLength: 64,
      maxLength: 64,
    }),
  )
  .map(([node, draws]) => {
    let d = 0;
    const draw = () => draws[d++ % draws.length]!;
    const render = (n: Flow): string => {
      if (typeof n === 'string') return n;
      const [, open] = draw();
      const parts = 'seq' in n ? n.seq.map(render) : n.map.map(([k, v]) => `${k}${draw()[2]}${render(v)}`);
      const body = parts.map((p, i) => (i === 0 ? p : `${draw()[0]}${p}`)).join('');
      const [, close, , trailing] = draw();
      const [o, c] = 'seq' in n ? ['[', ']'] : ['{', '}'];
      return `${o}${open}${body}${trailing && parts.length > 0 ? ',' : ''}${close}${c}`;
    };
    return render(node);
  });

const value = fc.oneof(
  { arbitrary: text, weight: 4 },
  text.map((t) => `'${t}'`),
  text.map((t) => `"${t}"`),
  fc.array(text, { maxLength: 3 }).map((a) => `[${a.join(', ')}]`),
  fc.array(fc.tuple(key, text), { maxLength: 3 }).map((a) => `{ ${a.map(([k, v]) => `${k}: ${v}`).join(', ')} }`),
  fc.tuple(text, text).map(([v, c]) => `${v} # ${c}`),
  { arbitrary: flowText, weight: 3 },
);
/** A block node: a one-line value, a flow collection on its own line, a mapping or a sequence. */
type Node = string | { f: string } | { m: Array<[string, Node]> } | { s: Node[] };
const { node } = fc.letrec<{ node: Node; map: Node; seq: Node }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small' },
    value,
    flowText.map((f) => ({ f })),
    tie('map'),
    tie('seq'),
  ),
  map: fc.array(fc.tuple(key, tie('node')), { minLength: 1, maxLength: 4 }).map((m) => ({ m })),
  seq: fc.array(tie('node'), { minLength: 1, maxLength: 4 }).map((s) => ({ s })),
}));
/** Lines of `n` at column `at`; `flush`: a sequence under a key sits at the key's column. */
const render = (n: Node, at: number, flush: boolean): string[] => {
  const pad = ' '.repeat(at);
  if (typeof n === 'string') return [`${pad}${n}`];
  if ('f' in n) return [`${pad}${n.f}`];
  if ('m' in n)
    return n.m.flatMap(([k, v]) =>
      typeof v === 'string'
        ? [`${pad}${k}: ${v}`]
        : [`${pad}${k}:`, ...render(v, 's' in v && flush ? at : at + 2, flush)],
    );
  return n.s.flatMap((v) => {
    if (typeof v === 'string') return [`${pad}- ${v}`];
    const inner = render(v, at + 2, flush);
    // A mapping starts on the dash's line ("- key: value"); a nested sequence or flow on the next one.
    return 'm' in v ? [`${pad}- ${inner[0]!.slice(at + 2)}`, ...inner.slice(1)] : [`${pad}-`, ...inner];
  });
};

/** The fast reader declines `doc`, or reads exactly what `yaml` reads (and never what `yaml` refuses). */
export function agrees(doc: string): void {
  const got = flat(doc);
  if (got === undefined) return;
  let expected: unknown;
  try {
    expected = full(doc);
  } catch {
    throw new Error(`read what yaml refuses: ${JSON.stringify(doc)}`);
  }
  expect(got, JSON.stringify(doc)).toStrictEqual(expected);
}

/** Block documents (a mapping or a sequence at the top), and flow documents (a flow collection at the top). */
export const documents = fc.oneof(
  fc
    .tuple(
      fc.oneof(
        fc.array(fc.tuple(key, node), { minLength: 1, maxLength: 4 }).map((m): Node => ({ m })),
        fc.array(node, { minLength: 1, maxLength: 4 }).map((s): Node => ({ s })),
      ),
      fc.boolean(),
    )
    .map(([n, flush]) => `${render(n, 0, flush).join('\n')}\n`),
  flowText.filter((f) => f.startsWith('[') || f.startsWith('{')).map((f) => `${f}\n`),
);

/** Random lines, indented at random, with dashes and keys. */
export const lineDocuments = fc
  .array(
    fc
      .tuple(
        fc.nat({ max: 6 }),
        fc.constantFrom('', '- ', '- - '),
        fc.option(word, { nil: undefined }),
        fc.oneof(text, flowText),
      )
      .map(([indent, dash, k, v]) => ' '.repeat(indent) + dash + (k === undefined ? '' : `${k}:`) + ` ${v}`),
    { minLength: 1, maxLength: 8 },
  )
  .map((lines) => `${lines.join('\n')}\n`);

/** Sequences that are not UTF-8: lone continuation, truncated, overlong, surrogate, above U+10FFFF, Latin-1. */
const BAD_BYTES: readonly number[][] = [
  [0x80],
  [0xbf],
  [0xc3],
  [0xe9],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf5],
  [0xff],
  [0xe2, 0x80],
];

/** A document with one bad sequence spliced in at a random byte offset (after the last one is complete). */
export const invalidUtf8Documents = fc
  .tuple(documents, fc.nat(), fc.constantFrom(...BAD_BYTES))
  .map(([doc, at, bad]) => {
    const bytes = Buffer.from(doc, 'utf8');
    // Only between characters, so the bad sequence is the first one and starts where it was put.
    let offset = at % (bytes.length + 1);
    while (offset < bytes.length && (bytes[offset]! & 0xc0) === 0x80) offset++;
    return { bytes: Buffer.concat([bytes.subarray(0, offset), Buffer.from(bad), bytes.subarray(offset)]), offset };
  });

/** The properties, each over `runs` documents; returns how many documents of several lines were read (not declined). */
export function checkDifferential(runs: number): { readMultiLine: number; readFlow: number } {
  let readMultiLine = 0;
  let readFlow = 0;
  fc.assert(
    fc.property(documents, (d) => {
      agrees(d);
      if (flat(d) !== undefined && d.split('\n').length > 4) readMultiLine++;
      // A flow collection left open at a line's end: spread over lines.
      if (flat(d) !== undefined && /[[{][^\]}\n]*\n/.test(d)) readFlow++;
    }),
    { numRuns: runs },
  );
  fc.assert(fc.property(lineDocuments, agrees), { numRuns: runs });
  fc.assert(
    fc.property(invalidUtf8Documents, ({ bytes, offset }) => {
      expect(parseFlatYaml(bytes)).toBeUndefined();
      expect(firstInvalidUtf8(bytes)).toBe(offset);
    }),
    { numRuns: runs },
  );
  return { readMultiLine, readFlow };
}

/** A keys file of `n` keys in the two flow styles: one flow mapping per line, and JSON-like over many lines. */
export function flowKeysFiles(n: number): [perLine: string, spread: string] {
  const perLine = Array.from(
    { length: n },
    (_, i) => `  - { apiKey: key-${i}, apiSecret: 'secret-${i}-0123456789', scopes: [accounts:read, orders:write] }`,
  );
  const spread = Array.from(
    { length: n },
    (_, i) =>
      `  {\n    "apiKey": "key-${i}",\n    "apiSecret": "secret-${i}-0123456789",\n    "rateLimit": { "rate": "10/s", "burst": ${i} },\n    "scopes": [\n      "accounts:read"\n    ]\n  }`,
  );
  return [`keys:\n${perLine.join('\n')}\n`, `keys: [\n${spread.join(',\n')}\n]\n`];
}
