import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import type { ErrorObject } from 'ajv';

/** The published schemas (config/schema/*.json): what editors check as you type, and what Keygate checks at load. */
export const SCHEMA_FILES = {
  policy: fileURLToPath(new URL('../../config/schema/policy.schema.json', import.meta.url)),
  keys: fileURLToPath(new URL('../../config/schema/keys.schema.json', import.meta.url)),
  managementTokens: fileURLToPath(new URL('../../config/schema/management-tokens.schema.json', import.meta.url)),
} as const;

export type SchemaName = keyof typeof SCHEMA_FILES;

/** A schema violation at a location written like Keygate's own problems: `routes[0].method`. */
interface Violation {
  readonly at: string;
  readonly message: string;
}

/**
 * Validates a parsed document against its published schema and merges the
 * result with the problems the hand-written checks found (which stay: they
 * check what a schema cannot, like CIDRs and path segments, and their wording
 * is what operators and tests know). A schema violation is added only where
 * the checks said nothing about that location or anything inside or around it,
 * so one mistake is reported once. Every problem of the file is returned at once.
 */
export function withSchemaProblems(
  name: SchemaName,
  data: unknown,
  file: string,
  problems: readonly string[],
): string[] {
  const taken = problems.map((p) => locationOf(p, file)).filter((l): l is string => l !== undefined);
  const extra = validate(name, data)
    .filter((v) => !taken.some((t) => overlaps(t, v.at)))
    .map((v) => `${file}: ${v.at === '' ? '' : `${v.at}: `}${v.message}`);
  return [...problems, ...new Set(extra)];
}

function validate(name: SchemaName, data: unknown): Violation[] {
  // One compile per load: files load at start and on reload only, and no module-level cache means no shared state.
  // Loaded on first use, synchronously: a command that validates no file (`keygate token`) never loads it.
  const { Ajv } = createRequire(import.meta.url)('ajv') as typeof import('ajv');
  const ajv = new Ajv({ allErrors: true, verbose: true, strict: true });
  // Annotations editors (yaml-language-server, VS Code) show on a mismatch; Keygate uses them too.
  ajv.addKeyword({ keyword: 'patternErrorMessage', schemaType: 'string' });
  ajv.addKeyword({ keyword: 'errorMessage', schemaType: 'string' });
  const check = ajv.compile(JSON.parse(readFileSync(SCHEMA_FILES[name], 'utf8')) as object);
  if (check(data)) return [];
  const errors = check.errors ?? [];
  // Inside anyOf each branch reports its own failure: say "none of the allowed forms" once instead.
  return errors.filter((e) => !/\/(anyOf|oneOf)\/\d+\//.test(e.schemaPath)).map(toViolation);
}

function toViolation(e: ErrorObject): Violation {
  const at = e.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((path, seg) => (/^\d+$/.test(seg) ? `${path}[${seg}]` : path ? `${path}.${seg}` : seg), '');
  const parent = (e.parentSchema ?? {}) as { patternErrorMessage?: string; errorMessage?: string };
  const child = (key: string) => (at ? `${at}.${key}` : key);
  switch (e.keyword) {
    case 'additionalProperties':
      return {
        at: child(String(e.params.additionalProperty)),
        message: 'unknown setting (not in the schema; a typo?)',
      };
    case 'required':
      return { at: child(String(e.params.missingProperty)), message: 'required' };
    case 'pattern':
      return { at, message: parent.patternErrorMessage ?? `must match ${String(e.params.pattern)}` };
    case 'not':
      return { at, message: parent.errorMessage ?? 'is not allowed here' };
    case 'enum':
      return {
        at,
        message: `must be one of ${(e.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    case 'anyOf':
    case 'oneOf':
      return { at, message: 'matches none of the allowed forms' };
    default:
      return { at, message: e.message ?? e.keyword };
  }
}

/**
 * `file: routes[0].method: …` → `routes[0].method`; undefined when a problem names no location. A location
 * followed by " (" is a whole entry named in a problem about how two entries relate (`routes[1] (line 3)
 * (GET …) is more specific than routes[0] …`): that says nothing about the fields inside them, so a typo
 * in one of those fields must still be reported (every problem at once).
 */
function locationOf(problem: string, file: string): string | undefined {
  if (!problem.startsWith(`${file}: `)) return undefined;
  const rest = problem.slice(file.length + 2);
  const at = /^[A-Za-z_$][\w$]*(?:\[\d+\])*(?:\.[A-Za-z_$][\w$]*(?:\[\d+\])*)*/.exec(rest)?.[0];
  return at === undefined || rest.startsWith(' (', at.length) ? undefined : at;
}

/** Same location, or one inside the other (`keys[0]` and `keys[0].apiSecret`). */
function overlaps(a: string, b: string): boolean {
  const inside = (outer: string, inner: string) =>
    inner === outer || (inner.startsWith(outer) && (inner[outer.length] === '.' || inner[outer.length] === '['));
  return inside(a, b) || inside(b, a);
}
