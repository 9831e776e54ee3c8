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
  const take = (name: string, value: string | string[] | undefined): Denial | undefined => {
    if (!allowed.has(name) || typeof value !== 'string') return deny('method_override');
    const m = value.trim().toUpperCase();
    if (!METHOD.test(m) || (wanted !== undefined && wanted !== m)) return deny('method_override');
    wanted = m;
    return undefined;
  };
  for (const name of Object.keys(headers)) {
    // Cheap filter first: every override header name contains "method".
    if (!name.includes('method')) continue;
    const folded = foldedName(name);
    if (HEADER_SET.has(folded)) {
      const refused = take(folded, headers[name]);
      if (refused) return refused;
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
        const refused = take(
          OVERRIDE_PARAM,
          name.length === OVERRIDE_PARAM.length && eq !== -1 ? decode(pair.slice(eq + 1)) : undefined,
        );
        if (refused) return refused;
      }
    }
  }
  if (wanted === undefined || wanted === method) return { ok: true, methods: [method] };
  return { ok: true, methods: [method, wanted] };
}

/** Percent-decoding that never throws (check-target has vetted every escape), "+" as space. */
function decode(s: string): string {
  return s
    .replace(/\+/g, ' ')
    .replace(/%([0-9a-fA-F]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}
