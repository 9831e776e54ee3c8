import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { REQUEST_STEPS } from '../../src/gateway/request-path.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const DOC = 'docs/reference/lifecycle.md';
const doc = readFileSync(join(root, DOC), 'utf8');
const source = readFileSync(join(root, 'src/gateway/request-path.ts'), 'utf8');

/** The lifecycle table's rows: number, step name (in backticks), and the Source column's link target. */
function rows(): { n: number; name: string; link: string }[] {
  const out: { n: number; name: string; link: string }[] = [];
  for (const line of doc.split('\n')) {
    const m = /^\| (\d+) \| `([A-Za-z]+)` \|[^|]*\| \[[^\]]*\]\(([^)]+)\) \|/.exec(line);
    if (m) out.push({ n: Number(m[1]), name: m[2] as string, link: m[3] as string });
  }
  return out;
}

/** Offsets of each name's first match of `pattern`, in REQUEST_STEPS order. */
const offsets = (pattern: (name: string) => RegExp, text: string) =>
  REQUEST_STEPS.map(({ name }) => text.search(pattern(name)));

describe('docs/reference/lifecycle.md and the request path', () => {
  it('lists exactly the steps of REQUEST_STEPS, numbered, in that order', () => {
    const got = rows();
    expect(got.map((r) => r.name)).toEqual(REQUEST_STEPS.map((s) => s.name));
    expect(got.map((r) => r.n)).toEqual(REQUEST_STEPS.map((_, i) => i + 1));
  });

  it('links every step to its source file, and the file exists', () => {
    for (const [i, row] of rows().entries()) {
      const target = resolve(root, 'docs/reference', row.link);
      expect(target, `row ${row.n}`).toBe(join(root, REQUEST_STEPS[i]?.source as string));
      expect(existsSync(target), row.link).toBe(true);
    }
  });

  it('request-path.ts declares the step functions in lifecycle order', () => {
    const at = offsets((name) => new RegExp(`\\n  function ${name}\\(`), source);
    expect(
      at.every((x) => x >= 0),
      `declared: ${JSON.stringify(at)}`,
    ).toBe(true);
    expect(at).toEqual([...at].sort((a, b) => a - b));
  });

  it('walk() calls the synchronous steps in lifecycle order', () => {
    const body = /function walk\(w: Walk\) \{([\s\S]*?)\n {2}\}/.exec(source)?.[1] ?? '';
    const called = REQUEST_STEPS.map((s) => s.name).filter((name) => body.includes(`${name}(`));
    // admit calls walk; authorizeKey and pass follow authenticate once the store answers.
    const names = REQUEST_STEPS.map((s) => s.name);
    expect(called).toEqual(names.slice(1, names.indexOf('authenticate') + 1));
    const at = called.map((name) => body.indexOf(`${name}(`));
    expect(at).toEqual([...at].sort((a, b) => a - b));
  });

  it.each(['src/gateway/request-path.ts', 'src/gateway/create-gateway.ts', 'src/pipeline/check-target.ts'])(
    '%s cites no step number (the order lives in REQUEST_STEPS)',
    (file) => {
      expect(readFileSync(join(root, file), 'utf8')).not.toMatch(/\bstep \d+\b/i);
    },
  );
});
