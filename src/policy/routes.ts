// Tested in test/unit/find-route.test.ts, test/unit/compile-route-table.test.ts.
/**
 * Route patterns: `METHOD /path/with/:param/segments` with an optional final
 * `*` that matches the rest (one or more segments, the last may be empty).
 * A rule is data; src/policy/route-table.ts compiles a list of them into the
 * table requests are matched against.
 */
export interface RouteRule {
  readonly methods: ReadonlySet<string> | '*';
  readonly pattern: string;
  readonly scopes: readonly string[];
  /** `upgrade: websocket`: a WebSocket upgrade to this route is relayed as a stream (src/gateway/streams/upgrade-path.ts). */
  readonly upgrade?: 'websocket';
  /** What an admitted request on this route spends from each budget that applies; 1 when absent. */
  readonly cost?: number;
  /** Where the rule was written ("file: routes[3] (line 12)"), for load-time messages. */
  readonly where: string;
}

/** What authorization needs from a match: the pattern (logged and counted, never the raw path) and the scopes. */
export interface RouteMatch {
  readonly pattern: string;
  readonly scopes: readonly string[];
  /** The route's cost (1 when absent); a request matching two routes pays the larger. */
  readonly cost?: number;
  /** Set when a method override is allowed and only one of the two methods has a route. */
  readonly partial?: true;
  /** The rule's `upgrade`; a match that merges two rules has none (a stream needs one route that says so). */
  readonly upgrade?: 'websocket';
}

/**
 * How a request path is compared with the patterns. The defaults are the
 * reading the common routers use (Express, Fastify with its usual options,
 * Spring, Django, Rails, ASP.NET...), so that Keygate never authorizes a path
 * as one route while the upstream runs another.
 */
export interface RouteMatching {
  /** false: `/API/V3/Items` is `/api/v3/items`. */
  readonly caseSensitive: boolean;
  /** ignore: `/a/b/` is `/a/b`. strict: they are two routes. */
  readonly trailingSlash: 'ignore' | 'strict';
}

export const DEFAULT_MATCHING: RouteMatching = Object.freeze({ caseSensitive: false, trailingSlash: 'ignore' });

/**
 * Bounds on the path, checked before anything else looks at it: the route
 * table walks a path once per segment, and these keep even that walk (and
 * src/pipeline/check-target.ts's own scans) small. Longer request paths
 * are refused, never truncated, and so is a route pattern that no request could match.
 */
export const MAX_PATH_BYTES = 4096;
export const MAX_PATH_SEGMENTS = 64;

/** Route cost bounds; src/store/budgets.ts spends it. */
export const MIN_COST = 1;
export const MAX_COST = 1000;

/** The route of the largest cost in a table (the first, among equals), or undefined when every route costs 1. */
export function largestRouteCost(table: { readonly rules: readonly RouteRule[] }): RouteRule | undefined {
  let most: RouteRule | undefined;
  for (const r of table.rules) if ((r.cost ?? 1) > (most?.cost ?? 1)) most = r;
  return most;
}

/** The larger cost of two routes a request is authorized against (both run, or either may). */
export function costOf(a: Pick<RouteMatch, 'cost'>, b: Pick<RouteMatch, 'cost'>): { cost?: number } {
  const cost = Math.max(a.cost ?? 1, b.cost ?? 1);
  return cost === 1 ? {} : { cost };
}

const METHOD = /^[A-Z]{1,16}$/;
const PARAM = /^:[A-Za-z_][A-Za-z0-9_]*$/;
const LITERAL_SEGMENT = /^[A-Za-z0-9\-._~%!$&'()+,=@:]+$/;

export function compileRoute(input: unknown, where: string, errors: string[]): RouteRule | undefined {
  if (typeof input !== 'object' || input === null) {
    errors.push(`${where}: must be an object with method, path and scopes`);
    return undefined;
  }
  const o = input as Record<string, unknown>;
  const before = errors.length;
  let methods: ReadonlySet<string> | '*' = '*';
  const m = o.method ?? o.methods;
  const list = typeof m === 'string' ? [m] : m;
  if (
    !Array.isArray(list) ||
    list.length === 0 ||
    list.some((x) => typeof x !== 'string' || (x !== '*' && !METHOD.test(x)))
  ) {
    errors.push(`${where}.method: must be an upper-case HTTP method, a list of them, or "*"`);
  } else if (!list.includes('*')) {
    methods = new Set(list as string[]);
  }
  const path = o.path;
  if (typeof path !== 'string' || !path.startsWith('/')) {
    errors.push(`${where}.path: must be a string starting with "/"`);
  } else {
    const segments = path.split('/').slice(1);
    segments.forEach((seg, i) => {
      const last = i === segments.length - 1;
      const ok =
        (seg === '*' && last) ||
        PARAM.test(seg) ||
        (LITERAL_SEGMENT.test(seg) && seg !== '.' && seg !== '..') ||
        (seg === '' && last);
      if (!ok) errors.push(`${where}.path: bad segment ${JSON.stringify(seg)} (use literals, :param, or a final *)`);
    });
    // A pattern no request can reach (step 1 refuses longer paths) is a mistake, not a route.
    if (path.length > MAX_PATH_BYTES || segments.length > MAX_PATH_SEGMENTS) {
      errors.push(
        `${where}.path: longer than requests may be (${MAX_PATH_BYTES} bytes, ${MAX_PATH_SEGMENTS} segments)`,
      );
    }
  }
  const scopes = o.scopes ?? [];
  if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== 'string' || s.length === 0)) {
    errors.push(`${where}.scopes: must be a list of non-empty strings`);
  }
  if (o.upgrade !== undefined && o.upgrade !== 'websocket') errors.push(`${where}.upgrade: must be "websocket"`);
  const cost = o.cost;
  if (cost !== undefined && (typeof cost !== 'number' || !Number.isInteger(cost) || cost < MIN_COST || cost > MAX_COST))
    errors.push(`${where}.cost: must be an integer from ${MIN_COST} to ${MAX_COST}`);
  if (errors.length > before) return undefined;
  return {
    methods,
    pattern: path as string,
    scopes: [...(scopes as string[])],
    ...(cost !== undefined && cost !== 1 && { cost: cost as number }),
    where,
    ...(o.upgrade === 'websocket' && { upgrade: 'websocket' as const }),
  };
}

/** A rule as messages and logs show it: "GET,HEAD /api/v3/items/:id", "* /health". */
export function showRule(r: Pick<RouteRule, 'methods' | 'pattern'>): string {
  return `${r.methods === '*' ? '*' : [...r.methods].join(',')} ${r.pattern}`;
}

/** Reads `caseSensitiveRoutes` and `trailingSlash` from the policy file (both optional, safe defaults). */
export function parseMatching(o: Record<string, unknown>, file: string, problems: string[]): RouteMatching {
  const cs = o.caseSensitiveRoutes ?? DEFAULT_MATCHING.caseSensitive;
  if (typeof cs !== 'boolean') problems.push(`${file}: caseSensitiveRoutes must be true or false`);
  const ts = o.trailingSlash ?? DEFAULT_MATCHING.trailingSlash;
  if (ts !== 'ignore' && ts !== 'strict') problems.push(`${file}: trailingSlash must be "ignore" or "strict"`);
  return { caseSensitive: cs === true, trailingSlash: ts === 'strict' ? 'strict' : 'ignore' };
}

/**
 * Is the path under `prefix` ("/api/v3/") the way the upstream reads it? With
 * case-insensitive matching `/API/V3/x` is. The prefix itself without its slash
 * (`/api/v3`) is, whatever `trailingSlash` says: a router mounted at the prefix
 * (Express `app.use('/api/v3', router)`, Fastify's `prefix`) runs its `/`
 * handler for it. Such a path must be authenticated, never looked up among the
 * public routes (a public `/*` would otherwise forward it with no token).
 */
export function isUnderPrefix(path: string, prefix: string, matching: RouteMatching): boolean {
  const head = matching.caseSensitive ? path.slice(0, prefix.length) : path.slice(0, prefix.length).toLowerCase();
  return head === prefix || isPrefixRoot(path, prefix, matching);
}

/** The prefix without its slash (`/api/v3`), in the case the matching reads. */
export function isPrefixRoot(path: string, prefix: string, matching: RouteMatching): boolean {
  if (path.length !== prefix.length - 1) return false;
  return (matching.caseSensitive ? path : path.toLowerCase()) === prefix.slice(0, -1);
}

/** Do the two rules take at least one method in common ("*" takes every method)? */
export function sameMethods(a: RouteRule, b: RouteRule): boolean {
  if (a.methods === '*' || b.methods === '*') return true;
  for (const m of a.methods) if (b.methods.has(m)) return true;
  return false;
}

/** Does the rule take this method (as listed: HEAD falling back to GET is the table's business)? */
export const hasMethod = (r: RouteRule, m: string): boolean => r.methods === '*' || r.methods.has(m);

/** `second.where` without the file name when `first` already said it ("p.yaml: routes[0] (line 2) and routes[1] (line 4)"). */
export function whereAfter(first: RouteRule, second: RouteRule): string {
  const cut = first.where.lastIndexOf(': ') + 2;
  return cut > 1 && second.where.startsWith(first.where.slice(0, cut)) ? second.where.slice(cut) : second.where;
}
