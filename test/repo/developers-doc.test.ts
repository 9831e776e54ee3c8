import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/deploy.js';
import { codeSpans, readDoc, section, tableRows } from '../helpers/markdown.js';

/** The forbidden rules of .dependency-cruiser.cjs, as far as this test reads them. */
type Rule = { name: string; from: { path?: string; pathNot?: string }; to: { path?: string } };
const cruiser = createRequire(import.meta.url)(join(repoRoot, '.dependency-cruiser.cjs')) as {
  forbidden: Rule[];
};

/** For each layered folder, the folders its `<folder>-imports-only-below` rule forbids. */
const forbiddenAbove = new Map(
  cruiser.forbidden.flatMap((rule) => {
    const folder = /^(\w+)-imports-only-below$/.exec(rule.name)?.[1];
    const above = /^\^src\/\(([\w|]+)\)\//.exec(rule.to.path ?? '')?.[1];
    return folder && above ? [[folder, new Set(above.split('|'))] as const] : [];
  }),
);
const layered = [...forbiddenAbove.keys()];

const rows = tableRows(section(readDoc('DEVELOPERS.md'), 'Layers')).filter((cells) => cells[0] !== 'Folder');
const rowOf = (folder: string) => rows.find((cells) => codeSpans(cells[0]!).includes(`${folder}/`));

describe('DEVELOPERS.md "Layers" is the layering .dependency-cruiser.cjs enforces', () => {
  it('reads the rules (one per layered folder)', () => {
    expect(layered.length).toBeGreaterThanOrEqual(9);
  });
  it.each(layered)('%s/ may import exactly the layered folders its rule does not forbid, and net/', (folder) => {
    const allowed = layered.filter((other) => other !== folder && !forbiddenAbove.get(folder)!.has(other));
    const documented = codeSpans(rowOf(folder)?.[2] ?? '').filter((span) => span.endsWith('/'));
    expect(documented.sort()).toEqual([...allowed, 'net'].map((f) => `${f}/`).sort());
  });
  it.each(
    readdirSync(join(repoRoot, 'src'), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name),
  )('src/%s/ has a row', (folder) => {
    expect(rowOf(folder)).toBeDefined();
  });
});

/** The rules that name who may import a store backend: `^src/(a/|b\\.ts$|…)` → ["a/", "b.ts", …]. */
const backendRules = cruiser.forbidden.filter((rule) => rule.name.endsWith('-only-from-the-assembly'));
const importers = (rule: Rule) =>
  (/^\^src\/\((.+)\)$/.exec(rule.from.pathNot ?? '')?.[1] ?? '')
    .split('|')
    .map((p) => p.replace(/\\/g, '').replace(/\$$/, ''));

describe('DEVELOPERS.md "Layers" names who may import a store backend, as .dependency-cruiser.cjs does', () => {
  const spans = codeSpans(section(readDoc('DEVELOPERS.md'), 'Layers'));
  it('reads the rules (the Redis and the memory store)', () => {
    expect(backendRules.map((r) => r.to.path)).toEqual(['^src/store/redis/', '^src/store/memory/']);
  });
  it.each(backendRules.map((r) => [r.name, importers(r)] as const))('%s: %j', (_name, files) => {
    expect(files.length).toBeGreaterThan(1);
    for (const file of files) expect(spans).toContain(file);
  });
});
