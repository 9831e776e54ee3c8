import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DataFileSyntaxError, readDataFile, YAML_OFF_THREAD_BYTES } from '../../src/files/read-data-file.js';
import { parseFlatYaml } from '../../src/files/flat-yaml.js';

/**
 * A large YAML file the fast reader declines is parsed by `yaml` on a worker thread (the built copy in
 * dist/, which this tier builds first), so its syntax tree is freed with the worker. The answer must
 * be the same as parsing in place: the data, or the syntax error located by line and column only.
 * A long comment makes the file large without making `yaml` slow; the "---" sends it past the fast reader.
 */
const dir = mkdtempSync(join(tmpdir(), 'keygate-yaml-off-thread-'));
const SECRET = 'off-thread-yaml-secret-0123456789';
const padding = `# ${'x'.repeat(YAML_OFF_THREAD_BYTES)}\n`;

describe('readDataFile, a large YAML file outside the fast forms', () => {
  it('reads on a worker thread exactly what yaml reads', () => {
    const text = `${padding}---\nbase: &b [accounts:read]\nkeys:\n  - { apiKey: a, apiSecret: ${SECRET}, scopes: *b }\n  - apiKey: b\n    label: |\n      two\n      lines\n`;
    const file = join(dir, 'keys.yaml');
    writeFileSync(file, text);
    expect(parseFlatYaml(Buffer.from(text))).toBeUndefined();
    expect(readDataFile(file)).toStrictEqual(parse(text));
  });

  it('reports a syntax error by line and column, never the text', () => {
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, `${padding}---\nkeys: [${SECRET}\n`);
    let caught: unknown;
    try {
      readDataFile(file);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(DataFileSyntaxError);
    const err = caught as DataFileSyntaxError;
    expect(err.format).toBe('YAML');
    expect(err.line).toBeGreaterThanOrEqual(3);
    expect(err.message).not.toContain(SECRET);
  });
});
