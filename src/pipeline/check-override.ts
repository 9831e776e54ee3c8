import type { IncomingHttpHeaders } from 'node:http';
import { OVERRIDE_HEADERS, OVERRIDE_PARAM } from '../policy/method-override.js';
import { deny, type Denial } from '../errors.js';
import { foldedName } from './forward-headers.js';

const METHOD = /^[A-Z]{1,16}$/;
const HEADER_SET: ReadonlySet<string> = new Set(OVERRIDE_HEADERS);
const OVERRIDE_IN_QUERY = /_method/i;

export interface Methods {
  readonly ok: true;
  /** The request method, then the overridden one when an allowed override names another. */
  readonly methods: readonly [string] | readonly [string, string];
}

/**
 * Refuses (400 40000, method_override) any override header or `_method` query
 * parameter the policy does not allow. An allowed one must name one method,
 * the same in every place it is given; the request is then authorized for
 * that method as well as its own.
 */
export function checkOverride(
  method: string,
  headers: IncomingHttpHeaders,
  query: string,
  allowed: ReadonlySet<string>,
): Methods | Denial {
  let wanted: string | undefined;
  // (`for in`, not Object.keys: no array of names per request; a headers object has no inherited names.)
  for (const name in headers) {
    // Cheap filter first: every override header name contains "method".
    if (!name.includes('method')) continue;
    const folded = foldedName(name);
    if (HEADER_SET.has(folded)) {
      const taken = take(folded, headers[name], allowed, wanted);
      if (typeof taken !== 'string') return taken;
      wanted = taken;
    }
  }
  // Query parsers decode names, so "%5Fmethod" and "_%6Dethod" are "_method" too; any of them is enough to look.
  if (query.length > 1 && (OVERRIDE_IN_QUERY.test(query) || query.includes('%'))) {
    for (const pair of query.slice(1).split(/[&;]/)) {
      const eq = pair.indexOf('=');
      const name = decode(eq === -1 ? pair : pair.slice(0, eq))
        .trim()
        .toLowerCase();
      // "_method", and the bracket or dot forms qs-style parsers turn into nested values.
      if (
        name.startsWith(OVERRIDE_PARAM) &&
        (name.length === OVERRIDE_PARAM.length ||
          name[OVERRIDE_PARAM.length] === '[' ||
          name[OVERRIDE_PARAM.length] === '.')
      ) {
        const taken = take(
          OVERRIDE_PARAM,
          name.length === OVERRIDE_PARAM.length && eq !== -1 ? decode(pair.slice(eq + 1)) : undefined,
          allowed,
          wanted,
        );
        if (typeof taken !== 'string') return taken;
        wanted = taken;
      }
    }
  }
  if (wanted === undefined || wanted === method) return onlyMethod(method);
  return { ok: true, methods: [method, wanted] };
}

/** One override as given: the method it names (the same as any named before it), or the refusal. */
function take(
  name: string,
  value: string | string[] | undefined,
  allowed: ReadonlySet<string>,
  wanted: string | undefined,
): string | Denial {
  if (!allowed.has(name) || typeof value !== 'string') return deny('method_override');
  const m = value.trim().toUpperCase();
  if (!METHOD.test(m) || (wanted !== undefined && wanted !== m)) return deny('method_override');
  return m;
}

/**
 * The usual verdict, no override: one frozen object per method, made at its first request (Node's parser
 * hands out the same method strings), instead of an object and an array per request. Bounded.
 */
function onlyMethod(method: string): Methods {
  let m = ONLY.get(method);
  if (m === undefined) {
    m = Object.freeze({ ok: true as const, methods: Object.freeze([method] as const) });
    if (ONLY.size >= 64) ONLY.clear();
    ONLY.set(method, m);
  }
  return m;
}
const ONLY = new Map<string, Methods>();

/** Percent-decoding that never throws (check-target has vetted every escape), "+" as space. */
function decode(s: string): string {
  return s
    .replace(/\+/g, ' ')
    .replace(/%([0-9a-fA-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}
