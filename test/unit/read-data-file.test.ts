import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DataFileEncodingError, DataFileSyntaxError, readDataFile } from '../../src/files/read-data-file.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-read-data-'));
let n = 0;
const write = (ext: string, text: string | Buffer) => {
  const file = join(dir, `f${n++}.${ext}`);
  writeFileSync(file, text);
  return file;
};
const SECRET = 'never-shown-secret-0123456789';

describe('readDataFile', () => {
  it.each<[string, string]>([
    ['plain block YAML (the fast reader)', `keys:\n  - apiKey: a\n    apiSecret: ${SECRET}\n    scopes: [x, y]\n`],
    ['YAML with an anchor (the yaml package)', `base: &b [x]\nkeys:\n  - apiKey: a\n    scopes: *b\n`],
    ['YAML with a block scalar (the yaml package)', `label: |\n  two\n  lines\n`],
    ['YAML with a null and a boolean (the yaml package)', `a: null\nb: true\nc: 1.5\n`],
  ])('reads %s as yaml.parse does', (_name, text) => {
    expect(readDataFile(write('yaml', text))).toStrictEqual(parse(text));
  });

  it('reads JSON with JSON.parse (by extension)', () => {
    expect(readDataFile(write('json', '{"a": [1, "b"]}'))).toStrictEqual({ a: [1, 'b'] });
  });

  it.each<[string, string, string]>([
    ['yml', `keys:\n  - apiKey: a\n    apiSecret: "${SECRET}\n`, 'YAML'],
    ['yaml', `keys: [${SECRET}\n`, 'YAML'],
    ['json', `{"keys": ["${SECRET}" x]}`, 'JSON'],
  ])('a .%s syntax error names the line, never the text', (ext, text, format) => {
    let caught: unknown;
    try {
      readDataFile(write(ext, text));
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DataFileSyntaxError);
    const err = caught as DataFileSyntaxError;
    expect(err.format).toBe(format);
    expect(err.line).toBeGreaterThan(0);
    expect(err.message).not.toContain(SECRET);
  });

  // A keys, policy or tokens file has one meaning: its bytes must be UTF-8, whichever reader reads it.
  it.each<[string, string]>([
    ['yaml', 'the fast reader'],
    ['yaml', 'the yaml package'],
    ['json', 'JSON.parse'],
  ])(
    'refuses a .%s file read by %s that is not UTF-8, naming the offset of the first bad byte, never the text',
    (ext, by) => {
      const head =
        ext === 'json'
          ? `{"keys": [{"apiKey": "a",\n "apiSecret": "caf`
          : `${by === 'the yaml package' ? '---\n' : ''}keys:\n  - apiKey: a\n    apiSecret: caf`;
      const tail = ext === 'json' ? `-${SECRET}"}]}\n` : `-${SECRET}\n`;
      const file = write(ext, Buffer.concat([Buffer.from(head), Buffer.from([0xe9]), Buffer.from(tail)]));
      let caught: unknown;
      try {
        readDataFile(file);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(DataFileEncodingError);
      const err = caught as DataFileEncodingError;
      expect(err.offset).toBe(Buffer.byteLength(head));
      expect(err.line).toBe(head.split('\n').length);
      expect(err.message).toContain(`byte offset ${Buffer.byteLength(head)}`);
      expect(err.message).not.toContain(SECRET);
    },
  );

  it.each(['yaml', 'json'])('reads a .%s file that starts with a BOM', (ext) => {
    const text = ext === 'json' ? '{"a": ["b"]}' : 'a: [b]\n';
    expect(readDataFile(write(ext, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)])))).toStrictEqual(
      {
        a: ['b'],
      },
    );
  });

  it.each<[string, string]>([
    ['flow mappings, one a line', 'keys:\n  - { apiKey: a, scopes: [x, "y"] }\n  - {apiKey: b}\n'],
    ['flow collections over lines', 'keys: [\n  { apiKey: a,\n    scopes: [x] },\n]\n'],
  ])('reads YAML with %s as yaml.parse does', (_name, text) => {
    expect(readDataFile(write('yaml', text))).toStrictEqual(parse(text));
  });
});
