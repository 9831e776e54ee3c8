import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DataFileSyntaxError, readDataFile } from '../../src/files/read-data-file.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-read-data-'));
let n = 0;
const write = (ext: string, text: string) => {
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
});
