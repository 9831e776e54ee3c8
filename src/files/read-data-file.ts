import { readFileSync } from 'node:fs';
import { isNode, LineCounter, parse as parseYaml, parseDocument } from 'yaml';

/** Reads a JSON or YAML file (by extension; YAML is a superset of JSON anyway). */
export function readDataFile(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  if (path.endsWith('.json')) return JSON.parse(text);
  return parseYaml(text, { maxAliasCount: 100 });
}

/**
 * Like readDataFile, plus where each value was written, so a problem can name
 * its line ("routes[3] (line 12)"). Lines come from the YAML reading of the
 * text, which for a JSON file is the same document.
 */
export function readDataFileWithLines(path: string): {
  data: unknown;
  lineOf(at: ReadonlyArray<string | number>): number | undefined;
} {
  const data = readDataFile(path);
  const text = readFileSync(path, 'utf8');
  const lines = new LineCounter();
  let doc: ReturnType<typeof parseDocument> | undefined;
  try {
    doc = parseDocument(text, { lineCounter: lines });
  } catch {
    doc = undefined;
  }
  return {
    data,
    lineOf(at) {
      const node: unknown = doc?.getIn(at, true);
      return isNode(node) && node.range ? lines.linePos(node.range[0]).line : undefined;
    },
  };
}
