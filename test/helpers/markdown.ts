import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { repoRoot } from './deploy.js';

/** The reader-facing documents: README.md and every docs/**\/*.md, as repository paths. */
export function docFiles(): string[] {
  const docs = readdirSync(join(repoRoot, 'docs'), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile() && d.name.endsWith('.md'))
    .map((d) => relative(repoRoot, join(d.parentPath, d.name)));
  return ['README.md', ...docs.sort()];
}

export const readDoc = (path: string): string => readFileSync(join(repoRoot, path), 'utf8');

/** The text with fenced code blocks blanked out (line count kept), so examples inside them are not read as markdown. */
function withoutFences(text: string): string {
  let fenced = false;
  return text
    .split('\n')
    .map((line) => {
      if (line.trimStart().startsWith('```')) {
        fenced = !fenced;
        return '';
      }
      return fenced ? '' : line;
    })
    .join('\n');
}

/**
 * One section: from the heading whose text is `title` (any level) to the next heading of the same or a higher
 * level. Fails the test when there is no such heading, so a renamed section is noticed.
 */
export function section(text: string, title: string): string {
  const lines = text.split('\n');
  const heads = withoutFences(text).split('\n');
  const start = heads.findIndex((l) => /^#{1,6} /.test(l) && l.replace(/^#+ /, '') === title);
  if (start === -1) throw new Error(`no heading "${title}"`);
  const level = heads[start]!.indexOf(' ');
  const end = heads.findIndex((l, i) => i > start && /^#{1,6} /.test(l) && l.indexOf(' ') <= level);
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

/** Rows of every table in the text (header rows too; callers pick rows by their first cell), as trimmed cells. An escaped `\|` stays inside its cell. */
export function tableRows(text: string): string[][] {
  return withoutFences(text)
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|[\s|:-]+\|$/.test(l))
    .map((l) =>
      l
        .slice(1, l.endsWith('|') ? -1 : undefined)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
}

/** The names written in backticks in a table cell: "`A`, `B`" → ["A", "B"]. */
export const codeSpans = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** GitHub's heading anchors: lower case, punctuation dropped (but `-` and `_`), spaces to `-`, repeats numbered. */
export function headingAnchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of withoutFences(text).split('\n')) {
    const m = /^#{1,6} (.+?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Every inline link and image target outside code (fenced blocks and `code spans`), with its line number. */
export function links(text: string): Array<{ target: string; line: number }> {
  const out: Array<{ target: string; line: number }> = [];
  withoutFences(text)
    .split('\n')
    .forEach((line, i) => {
      for (const m of line.replace(/`[^`]*`/g, '``').matchAll(/\]\(([^)\s]+)\)/g))
        out.push({ target: m[1]!, line: i + 1 });
    });
  return out;
}
