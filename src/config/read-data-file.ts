import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/** Reads a JSON or YAML file (by extension; YAML is a superset of JSON anyway). */
export function readDataFile(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  if (path.endsWith('.json')) return JSON.parse(text);
  return parseYaml(text, { maxAliasCount: 100 });
}
