import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { renderReference } from '../../src/cli/cli-reference.js';
import { loadAll, loaded, type Command } from '../../src/cli/command-line.js';
import { program } from '../../src/cli/main.js';

/**
 * docs/reference/cli.md holds, between two markers, what renderReference
 * makes of the command table. KEYGATE_WRITE_DOCS=1 rewrites that part:
 *   KEYGATE_WRITE_DOCS=1 npx vitest run test/unit/cli-reference.test.ts
 */
const FILE = new URL('../../docs/reference/cli.md', import.meta.url);
const BEGIN =
  '<!-- BEGIN generated from src/cli by test/unit/cli-reference.test.ts (its header says how to rewrite it) -->\n';
const END = '<!-- END generated -->\n';

const doc = () => readFileSync(FILE, 'utf8');
const generatedPart = (text: string) => text.slice(text.indexOf(BEGIN) + BEGIN.length, text.indexOf(END));

/** The table with every command loaded (the CLI imports a command's module only when it runs). */
const table = await loadAll(program);

if (process.env.KEYGATE_WRITE_DOCS === '1') {
  const text = doc();
  writeFileSync(
    FILE,
    `${text.slice(0, text.indexOf(BEGIN) + BEGIN.length)}${renderReference(table)}${text.slice(text.indexOf(END))}`,
  );
}

/** Every command path with its options, from the table. */
function fromTable(cmd: Command, path: string): Array<[string, string[]]> {
  return [
    [path, cmd.spec.options.map((o) => `--${o.name}`)],
    ...(cmd.subcommands ?? []).map(loaded).flatMap((c) => fromTable(c, `${path} ${c.spec.name}`)),
  ];
}

/** Every command heading with the options of its table, from the document. */
function fromDoc(text: string): Array<[string, string[]]> {
  return text
    .split(/^#+ /m)
    .slice(1)
    .map((s) => [
      /^`([^`]+)`/.exec(s)?.[1] ?? s.split('\n')[0]!,
      [...s.matchAll(/^\| `(--[a-z-]+)/gm)].map((m) => m[1]!),
    ]);
}

describe('the command table', () => {
  it('a command loaded on demand declares the name and summary its parent lists it with', () => {
    const listed = program.subcommands!.map((c) => c.spec);
    expect(table.subcommands!.map((c) => ({ name: c.spec.name, summary: c.spec.summary }))).toEqual(
      listed.map((s) => ({ name: s.name, summary: s.summary })),
    );
  });
});

describe('docs/reference/cli.md', () => {
  it('has both markers, in order', () => {
    const text = doc();
    expect(text.indexOf(BEGIN)).toBeGreaterThan(-1);
    expect(text.indexOf(END)).toBeGreaterThan(text.indexOf(BEGIN));
  });

  it('lists every command and key action with its options, and nothing the table lacks', () => {
    expect(fromDoc(generatedPart(doc()))).toEqual(fromTable(table, 'keygate'));
  });

  it('is what the table generates, word for word', () => {
    expect(generatedPart(doc())).toBe(renderReference(table));
  });
});
