import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseFlatYaml } from '../../src/files/flat-yaml.js';
import { toExternal, type KeyRecord } from '../../src/keys/key-record.js';
import { checkDifferential, flat, flowKeysFiles, full } from '../helpers/cases/yaml-documents.js';

/** Documents per property in this tier (each property is also run by thousands in the adversarial tier). */
const UNIT_RUNS = 100;

describe('parseFlatYaml', () => {
  // Read here: the result must be exactly what `yaml` gives.
  it.each<[string, string]>([
    [
      'the documented keys file',
      'keys:\n  - apiKey: a\n    apiSecret: long-enough-secret-123\n    scopes: [accounts:read]\n',
    ],
    [
      'every field of a key',
      [
        'keys:',
        '  - apiKey: svc-1',
        '    apiSecret: "quoted \\"secret\\" with \\\\ and \\u00e9"',
        "    id: 'single ''quoted'''",
        '    owner: acct_9.x-1',
        '    scopes: [accounts:read, "orders:*", \'x\']',
        '    id2: ?q',
        '    allowIps:',
        '      - 10.0.0.0/8',
        '      - ::1',
        '    state: revoked',
        '    createdAt: 2026-01-02T03:04:05.000Z',
        '    rateLimit: { rate: 100/s, burst: 200 }',
        '    previousSecrets:',
        '      - apiSecret: old-secret-0123456789',
        '        validUntil: 2027-01-01T00:00:00Z',
        '    label: a label # with a comment',
        '  - apiKey: b',
        '    apiSecret: -starts-with-a-dash-ok',
        '    scopes: []',
        '    allowIps: []',
        '    rateLimit: {}',
      ].join('\n'),
    ],
    ['a sequence at the key’s indentation', 'keys:\n- apiKey: a\n  scopes:\n  - x\n  - y\nother: 1\n'],
    [
      'comments, blank lines and CRLF',
      '# head\r\nkeys:   # list\r\n\r\n  - apiKey: a # k\r\n    # inner\r\n    n: 0\r\n',
    ],
    ['an empty value is null', 'keys:\n  - apiKey: a\n    label:\n  -\n  - plain text here\nlast:\n'],
    ['non-ASCII text', 'keys:\n  - apiKey: a\n    label: café ünïcödé label that is long\n    owner: "ü"\n'],
    ['a colon or hash inside a plain scalar', 'a: http://x.example/p#frag\nb: k:v\nc: a#b\n'],
    ['a nested list item on its own line', 'keys:\n  -\n    apiKey: a\n    n: 42\n'],
    [
      'one flow mapping per key',
      'keys:\n  - { apiKey: a, apiSecret: "s\\u00e9cret-0123456789", scopes: [accounts:read, \'orders:*\'] }\n' +
        "  - {apiKey: b, apiSecret: 'x''y-0123456789', rateLimit: {rate: 10/s, burst: 20}, allowIps: [::1, 10.0.0.0/8]}\n",
    ],
    [
      'flow collections spread over lines, with comments and trailing commas',
      'keys: [\n  { apiKey: a,   # first\n    scopes: [\n      x,\n      y,\n    ] },\n\n  {apiKey: b},\n]\nother: [ ]\n',
    ],
    ['a flow collection on its own line', 'keys:\n  [ {apiKey: a}, {apiKey: b} ]\nx:\n  - {a: b}\n  -\n    [c]\n'],
    ['JSON text', '{"keys": [{"apiKey": "a", "n": 1, "scopes": [], "m": {}}]}\n'],
    ['JSON text over lines', '{\n  "keys": [\n    {\n      "apiKey":"a",\n      "s": "b"\n    }\n  ]\n}\n'],
    ['a flow document at the top', '[a, {b: c}, [d]]\n'],
    ['a nested flow list', 'a: [[1], [x, [y]]]\n'],
    ['a trailing comma', 'a: [x, ]\nb: {c: d,}\n'],
    ['the least indentation yaml allows', 'k:\n  - a: [x,\n     y\n    ]\n  - [\n     z\n    ]\nm: {\n p: q\n}\n'],
    // A line at the block's indentation may close the outermost flow collection, and only that one.
    ['the outermost bracket closed at the key’s indentation', 'a:\n  [\n]\nb: [[x],\n]\nc: {d: [x],\n}\n'],
    ['the outermost bracket closed at the dash’s indentation', '- [\n]\n-\n  { a: [x]\n}\n'],
    ['a nested bracket closed at column 0 in a flow document', '[ [\n] ]\n'],
    ['a nested bracket closed at column 0 in a flow mapping document', '{ a: [\nx\n] }\n'],
  ])('reads %s exactly as yaml does', (_name, text) => {
    const got = flat(text);
    expect(got).not.toBeUndefined();
    expect(got).toStrictEqual(full(text));
  });

  // Declined: readDataFile then parses with `yaml`, which reads them (or reports the error) as before.
  it.each<[string, string]>([
    ['an anchor and alias', 'a: &x v\nb: *x\n'],
    ['a tag', 'a: !!str 1\n'],
    ['a block scalar', 'a: |\n  line\n'],
    ['a folded scalar', 'a: >-\n  line\n'],
    ['a plain scalar over two lines', 'keys:\n  - apiKey: a\n    label: one\n      two\n'],
    ['a quoted scalar over two lines', 'a: "one\n  two"\n'],
    ['a tab', 'a:\tb\n'],
    ['a duplicate key', 'a: 1\na: 2\n'],
    ['a duplicate key in a flow map', 'a: { b: 1, b: 2 }\n'],
    ['a null', 'a: null\n'],
    ['a tilde', 'a: ~\n'],
    ['a boolean', 'a: true\n'],
    ['a boolean key', 'true: 1\n'],
    ['a negative number', 'a: -1\n'],
    ['a float', 'a: 1.5\n'],
    ['an octal', 'a: 0o17\n'],
    ['a hex number', 'a: 0x1F\n'],
    ['infinity', 'a: .inf\n'],
    ['a large integer', 'a: 12345678901234567890\n'],
    ['a leading zero', 'a: 0123\n'],
    ['a YAML-only escape', 'a: "\\x41"\n'],
    ['a plain scalar over two lines in a flow list', 'a: [x\n  y]\n'],
    ['a quoted scalar over two lines in a flow list', 'a: ["x\n  y"]\n'],
    ['two commas', 'a: [x,, y]\n'],
    ['an empty entry', 'a: [,]\n'],
    ['a flow line at the key’s indentation', 'k:\n  x: [\n  a]\n'],
    ['a flow line at the dash’s indentation', 'k:\n  - [a,\n  b]\n'],
    ['a closing bracket left of the block', 'k:\n  - [\n    a\n ]\n'],
    // yaml refuses these: its lexer lets a line at the block's indentation close the outermost only.
    ['a nested bracket closed at the key’s indentation (a flow value on its own line)', 'a:\n  { a: [\n] }\n'],
    ['a nested bracket closed at the key’s indentation', 'a: [ [\n] ]\n'],
    ['a nested bracket after an entry closed at the key’s indentation', 'a: [x, [\n]]\n'],
    ['a nested bracket closed at a nested key’s indentation', 'k:\n  x: { a: [\n  ] }\n'],
    ['a nested bracket closed at the dash’s indentation', '- [ [\n] ]\n'],
    ['a nested bracket closed at a nested dash’s indentation', 'k:\n  - [ {a: b,\n  } ]\n'],
    ['a flow key with its value on the next line', 'a: { b:\n  c }\n'],
    ['a flow key without a value', 'a: { b }\n'],
    ['an explicit key in a flow map', 'a: { ? b : c }\n'],
    ['a comment right after a comma', 'a: [x,# c\n  y]\n'],
    ['a comment right after a bracket', 'a: [x]# c\n'],
    ['text after a flow collection', 'a: {x: y}z\n'],
    ['a flow collection as a key', '[a]: b\n'],
    ['an unclosed flow list', 'a: [x,\n  y\n'],
    ['a document marker inside a flow list', '[a,\n---]\n'],
    ['a document marker', '---\na: 1\n'],
    ['a directive', '%YAML 1.2\n---\na: 1\n'],
    ['a BOM', '\ufeffa: 1\n'],
    ['a quoted key', '"a": 1\n'],
    ['a complex key', '? a\n: 1\n'],
    ['a lone question mark', 'a: ? b\n'],
    ['a __proto__ key', '__proto__: 1\n'],
    ['a scalar document', 'just text\n'],
    ['an empty document', ''],
    ['only comments', '# nothing\n'],
    ['a mapping on a value line', 'a: b: c\n'],
    ['text after a quoted scalar', 'a: "b" c\n'],
    ['a deeper line after a value', 'a: 1\n  b: 2\n'],
    ['a line less indented than the first', '  a: 1\nb: 2\n'],
    ['a compact nested list', 'a:\n  - - x\n'],
    ['a mapping pair inside a flow list', 'a: [b: c]\n'],
    ['a control character', 'a: b\u0007\n'],
    ['a line separator', 'a: b\u2028c\n'],
    ['a paragraph separator', 'a: b\u2029c\n'],
    ['a NEL', 'a: b\u0085c\n'],
    ['a NUL', 'a: b\u0000c\n'],
    ['a NUL in a flow list', 'a: [b\u0000]\n'],
  ])('declines %s', (_name, text) => {
    expect(flat(text)).toBeUndefined();
  });

  it('declines bytes that are not UTF-8 (readDataFile refuses them before either reader)', () => {
    // A Latin-1 é in a secret: the reader once took such a line for ASCII and read it as Latin-1.
    const latin1 = Buffer.concat([
      Buffer.from('keys:\n  - apiKey: a\n    apiSecret: caf'),
      Buffer.from([0xe9]),
      Buffer.from('-0123456789\n'),
    ]);
    expect(parseFlatYaml(latin1)).toBeUndefined();
    expect(parseFlatYaml(Buffer.from([0x61, 0x3a, 0x20, 0xed, 0xa0, 0x80, 0x0a]))).toBeUndefined(); // an encoded surrogate
  });

  it('reads a flow-style keys file of 100 keys exactly as yaml does (10,000: the adversarial tier)', () => {
    for (const text of flowKeysFiles(100)) {
      const got = flat(text) as { keys: unknown[] } | undefined;
      expect(got?.keys).toHaveLength(100);
      expect(got).toStrictEqual(full(text));
    }
  });

  it('reads what keygate keys export writes (yaml.stringify of the external form) as yaml does', () => {
    const records: KeyRecord[] = Array.from({ length: 50 }, (_, i) => ({
      id: `id-${i}`,
      apiKey: `key-${i}`,
      owner: `owner-${i % 3}`,
      secret: `s3cret-${i}-${'x'.repeat(i)}`,
      scopes: i % 2 ? ['accounts:read', 'orders:write'] : [],
      allowIps: i % 5 ? [] : ['10.0.0.0/8', '2001:db8::/32', '::1', '::ffff:10.0.0.1'],
      state: i % 7 ? 'active' : 'revoked',
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
      ...(i % 4 === 0 && { label: `label ${i}: with a colon, 'quotes' and # hash` }),
      ...(i % 6 === 0 && { rateLimit: { rate: '10/s', burst: 20 } }),
      ...(i % 9 === 0 && {
        previousSecrets: [{ secret: 'previous-secret-123456', validUntil: '2027-01-01T00:00:00Z' }],
      }),
    }));
    const text = stringify({ keys: records.map((r) => toExternal(r)) });
    const got = flat(text);
    expect(got).not.toBeUndefined();
    expect(got).toStrictEqual(full(text));
  });

  it('keeps no slice of the file in long values (each is a string of its own)', () => {
    // Not observable from JavaScript directly; what is: the values are equal, and reading them
    // after the buffer is overwritten still gives the original text (copies, not views of the bytes).
    const buf = Buffer.from('keys:\n  - apiKey: a\n    apiSecret: a-long-secret-value-0123456789\n');
    const data = parseFlatYaml(buf) as { keys: Array<{ apiSecret: string }> };
    buf.fill(0x78);
    expect(data.keys[0]!.apiSecret).toBe('a-long-secret-value-0123456789');
  });
  // The cases above are the ones thought of. Random documents in every style, with the characters
  // and bytes that matter, are read by both readers (test/helpers/cases/yaml-documents.ts). Here a
  // smoke run of a few hundred documents a property, to keep the unit tier cheap; the adversarial
  // tier's yaml-differential.test.ts runs thousands (KEYGATE_PROPERTY_RUNS).
  it('on random documents, declines or reads exactly what yaml reads (smoke run)', () => {
    // At 100 documents a property about one multi-line document is read, so whether the property is
    // vacuous is checked where thousands run (the adversarial tier); the cases above are read here.
    checkDifferential(UNIT_RUNS);
  });
});
