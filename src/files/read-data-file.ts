import { readFileSync } from 'node:fs';
import { parseFlatYaml } from './flat-yaml.js';
import { firstInvalidUtf8 } from './utf8-check.js';
import { parseYamlOffThread } from './yaml-off-thread.js';
import { isMainThread } from 'node:worker_threads';
import { createRequire } from 'node:module';

/**
 * The `yaml` package, loaded on first use: most files are read by flat-yaml.ts alone, and a command that
 * reads none (`keygate token`) should not pay for loading it. `require` keeps the readers synchronous, and
 * its cache makes every later call a lookup.
 */
const require = createRequire(import.meta.url);
const yaml = () => require('yaml') as typeof import('yaml');

/**
 * A file that is not valid YAML or JSON, located by line and column only. The parsers' own messages
 * quote the text around the error (YAML prints the offending line and the one before it, Node's
 * JSON.parse a slice of the input), and these files hold API secrets and token hashes: none of the
 * text may reach a log line or a terminal.
 */
export class DataFileSyntaxError extends Error {
  override readonly name = 'DataFileSyntaxError';
  constructor(
    readonly format: 'YAML' | 'JSON',
    readonly line: number | undefined,
    readonly column: number | undefined,
    readonly kind: string | undefined,
  ) {
    const at = line === undefined ? 'syntax error' : `syntax error at line ${line}, column ${column}`;
    super(`not valid ${format}: ${at}${kind ? ` (${kind})` : ''}; the text is not shown, as it may hold secrets`);
  }
}

/**
 * A file whose bytes are not UTF-8 text, located by the byte offset of the first bad sequence (and its
 * line). Refused whole, by whichever reader would read it: a byte replaced or reinterpreted would give
 * a key a secret that depends on how the file was read.
 */
export class DataFileEncodingError extends Error {
  override readonly name = 'DataFileEncodingError';
  constructor(
    readonly offset: number,
    readonly line: number,
  ) {
    super(
      `not valid UTF-8: the first bad byte sequence is at byte offset ${offset} (line ${line}); ` +
        'the file must be UTF-8 text (a BOM is allowed); the text is not shown, as it may hold secrets',
    );
  }
}

/** The file's bytes, refused with DataFileEncodingError unless they are all UTF-8. */
function readUtf8File(path: string): Buffer {
  const bytes = readFileSync(path);
  const bad = firstInvalidUtf8(bytes);
  if (bad >= 0) {
    let line = 1;
    for (let i = bytes.indexOf(10); i >= 0 && i < bad; i = bytes.indexOf(10, i + 1)) line++;
    throw new DataFileEncodingError(bad, line);
  }
  return bytes;
}

/** Line and column (1-based) of a character offset. */
function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset).split('\n');
  return { line: before.length, column: before.at(-1)!.length + 1 };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    // Node's message may quote the input: keep only the offset it gives, when it gives one.
    const offset = /at position (\d+)/.exec((err as Error).message)?.[1];
    if (offset !== undefined) {
      const { line, column } = position(text, Number(offset));
      throw new DataFileSyntaxError('JSON', line, column, undefined);
    }
    // Otherwise the YAML reading of the same text locates the first error, again without its text.
    const first = yaml().parseDocument(text, { logLevel: 'silent' }).errors[0];
    throw new DataFileSyntaxError('JSON', first?.linePos?.[0].line, first?.linePos?.[0].col, undefined);
  }
}

export function parseYamlText(text: string): unknown {
  try {
    // logLevel 'error': YAML warnings (an unknown tag) would otherwise be printed to stderr with a code frame.
    return yaml().parse(text, { maxAliasCount: 100, logLevel: 'error', prettyErrors: false });
  } catch (err) {
    if (!(err instanceof yaml().YAMLError)) throw err;
    const at = err.linePos?.[0] ?? (typeof err.pos?.[0] === 'number' ? position(text, err.pos[0]) : undefined);
    const column = at && 'col' in at ? at.col : at?.column;
    throw new DataFileSyntaxError('YAML', at?.line, column, err.code);
  }
}

/**
 * Reads a JSON or YAML file (by extension; YAML is a superset of JSON anyway). The file must be UTF-8
 * (DataFileEncodingError otherwise; a leading BOM is skipped). YAML in the forms keys files are
 * written in (block and flow collections of plain and quoted one-line scalars) is read by
 * flat-yaml.ts (the same data, in a fraction of the time and memory); anything else, and every
 * syntax error, by the `yaml` package.
 */
export function readDataFile(path: string): unknown {
  const bytes = readUtf8File(path);
  if (path.endsWith('.json')) {
    const bom = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
    return parseJson(bytes.toString('utf8', bom));
  }
  const flat = parseFlatYaml(bytes);
  if (flat !== undefined) return flat;
  if (!isMainThread || bytes.length < YAML_OFF_THREAD_BYTES) return parseYamlText(bytes.toString('utf8'));
  const answer = parseYamlOffThread(bytes.toString('utf8'));
  if (answer.ok) return answer.data;
  if (answer.line === undefined && answer.kind === undefined) throw new Error(answer.message);
  throw new DataFileSyntaxError('YAML', answer.line, answer.column, answer.kind);
}

/**
 * A YAML file the fast reader declines and at least this large is parsed on a worker thread when read
 * on the main thread (yaml-off-thread.ts): the `yaml` package's syntax tree is then freed with the
 * worker instead of staying resident. Below it (a policy file, a few hundred keys) the tree is small
 * and starting a thread costs more. A worker thread (the reload's loader) parses in place: it is
 * itself ended once its records are handed over.
 */
export const YAML_OFF_THREAD_BYTES = 1024 * 1024;

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
  const { LineCounter, isNode, parseDocument } = yaml();
  const lines = new LineCounter();
  let doc: ReturnType<typeof parseDocument> | undefined;
  try {
    doc = parseDocument(text, { lineCounter: lines, logLevel: 'silent' });
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
