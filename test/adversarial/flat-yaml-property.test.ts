import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseFlatYaml } from '../../src/files/flat-yaml.js';

/**
 * The fast keys-file reader against the `yaml` package on 10,000 random documents: moved out of the unit tier
 * (test/unit/flat-yaml.test.ts keeps the cases thought of), which must stay quick (issue 40).
 */
const flat = (text: string) => parseFlatYaml(Buffer.from(text, 'utf8'));

/** What the `yaml` package reads, as readDataFile called it before the fast reader. */
const full = (text: string) => parse(text, { maxAliasCount: 100, logLevel: 'error', prettyErrors: false }) as unknown;

describe('parseFlatYaml on random documents (property)', () => {
  // The cases above are the ones thought of. Here random documents are read by both: block mappings and
  // sequences nested at random (both sequence indentations), with values built from the pieces that
  // matter (quotes, flow brackets, "#", ":", "- ", escapes, numbers, core-schema words); and, apart,
  // random lines. The fast reader must decline or agree with `yaml`, and decline whatever `yaml` refuses.
  const word = fc.constantFrom('a', 'apiKey', 'k-1', 'x_y', 'true', 'null', '1', '0x1', '__proto__', 'é');
  const piece = fc.constantFrom(
    ...[' ', '  ', '- ', ': ', ':', '#', ' #', '"', "'", "''", '\\', '\\"', '\\u00e9', '\\x41'],
    ...['[', ']', '{', '}', ', ', ',', '?', '|', '>', '&a', '*a', '!', '%', '@', '`', '~', '.', '-'],
    ...['10.0.0.0/8', '::1', 'http://h/p#f', '1.5', '-1', '007', '12345678901234567890', '.inf', 'TRUE', 'Null'],
  );
  // Mostly words, so that many documents are in the subset and the comparison is made, not declined.
  const text = fc
    .array(fc.oneof({ arbitrary: word, weight: 6 }, { arbitrary: fc.constantFrom(' ', '-', '.'), weight: 2 }, piece), {
      minLength: 1,
      maxLength: 4,
    })
    .map((p) => p.join(''));
  const key = fc.oneof({ arbitrary: fc.constantFrom('a', 'b', 'apiKey', 'scopes', 'k-1', 'x_y'), weight: 9 }, word);
  const value = fc.oneof(
    { arbitrary: text, weight: 4 },
    text.map((t) => `'${t}'`),
    text.map((t) => `"${t}"`),
    fc.array(text, { maxLength: 3 }).map((a) => `[${a.join(', ')}]`),
    fc.array(fc.tuple(key, text), { maxLength: 3 }).map((a) => `{ ${a.map(([k, v]) => `${k}: ${v}`).join(', ')} }`),
    fc.tuple(text, text).map(([v, c]) => `${v} # ${c}`),
  );
  type Node = string | { m: Array<[string, Node]> } | { s: Node[] };
  const { node } = fc.letrec<{ node: Node; map: Node; seq: Node }>((tie) => ({
    node: fc.oneof({ depthSize: 'small' }, value, tie('map'), tie('seq')),
    map: fc.array(fc.tuple(key, tie('node')), { minLength: 1, maxLength: 4 }).map((m) => ({ m })),
    seq: fc.array(tie('node'), { minLength: 1, maxLength: 4 }).map((s) => ({ s })),
  }));
  /** Lines of `n` at column `at`; `flush`: a sequence under a key sits at the key's column. */
  const render = (n: Node, at: number, flush: boolean): string[] => {
    const pad = ' '.repeat(at);
    if (typeof n === 'string') return [`${pad}${n}`];
    if ('m' in n)
      return n.m.flatMap(([k, v]) =>
        typeof v === 'string'
          ? [`${pad}${k}: ${v}`]
          : [`${pad}${k}:`, ...render(v, 's' in v && flush ? at : at + 2, flush)],
      );
    return n.s.flatMap((v) => {
      if (typeof v === 'string') return [`${pad}- ${v}`];
      const inner = render(v, at + 2, flush);
      // A mapping starts on the dash's line ("- key: value"); a nested sequence on the next one.
      return 'm' in v ? [`${pad}- ${inner[0]!.slice(at + 2)}`, ...inner.slice(1)] : [`${pad}-`, ...inner];
    });
  };
  const agrees = (doc: string) => {
    const got = flat(doc);
    if (got === undefined) return;
    let expected: unknown;
    try {
      expected = full(doc);
    } catch {
      throw new Error(`read what yaml refuses: ${JSON.stringify(doc)}`);
    }
    expect(got).toStrictEqual(expected);
  };

  it('on random nested documents, declines or reads exactly what yaml reads', () => {
    const top = fc.oneof(
      fc.array(fc.tuple(key, node), { minLength: 1, maxLength: 4 }).map((m): Node => ({ m })),
      fc.array(node, { minLength: 1, maxLength: 4 }).map((s): Node => ({ s })),
    );
    const doc = fc.tuple(top, fc.boolean()).map(([n, flush]) => `${render(n, 0, flush).join('\n')}\n`);
    let read = 0;
    fc.assert(
      fc.property(doc, (d) => {
        agrees(d);
        if (flat(d) !== undefined && d.split('\n').length > 4) read++;
      }),
      { numRuns: 5_000 },
    );
    // Not a vacuous property: multi-line documents are read, not only declined (about 250 of 5,000 here).
    expect(read).toBeGreaterThan(100);
  });

  it('on random lines, declines or reads exactly what yaml reads', () => {
    const line = fc
      .tuple(fc.nat({ max: 6 }), fc.constantFrom('', '- ', '- - '), fc.option(word, { nil: undefined }), text)
      .map(([indent, dash, key, v]) => ' '.repeat(indent) + dash + (key === undefined ? '' : `${key}:`) + ` ${v}`);
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 8 }), (lines) => agrees(`${lines.join('\n')}\n`)),
      { numRuns: 5_000 },
    );
  });
});
