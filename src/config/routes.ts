/**
 * Route patterns: `METHOD /path/with/:param/segments` with an optional final
 * `*` that matches the rest. Matching is exact and case-sensitive on the raw
 * (already vetted) path, first match wins.
 */
export interface RouteRule {
  readonly methods: ReadonlySet<string> | '*';
  readonly pattern: string;
  readonly scopes: readonly string[];
  match(path: string): boolean;
}

const METHOD = /^[A-Z]{1,16}$/;
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
  if (!Array.isArray(list) || list.length === 0 || list.some((x) => typeof x !== 'string' || (x !== '*' && !METHOD.test(x)))) {
    errors.push(`${where}.method: must be an upper-case HTTP method, a list of them, or "*"`);
  } else if (!list.includes('*')) {
    methods = new Set(list as string[]);
  }
  const path = o.path;
  let segments: string[] = [];
  if (typeof path !== 'string' || !path.startsWith('/')) {
    errors.push(`${where}.path: must be a string starting with "/"`);
  } else {
    segments = path.split('/').slice(1);
    segments.forEach((seg, i) => {
      const last = i === segments.length - 1;
      const ok = (seg === '*' && last) || (/^:[A-Za-z_][A-Za-z0-9_]*$/.test(seg)) || (LITERAL_SEGMENT.test(seg) && seg !== '.' && seg !== '..') || (seg === '' && last);
      if (!ok) errors.push(`${where}.path: bad segment ${JSON.stringify(seg)} (use literals, :param, or a final *)`);
    });
  }
  const scopes = o.scopes ?? [];
  if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== 'string' || s.length === 0)) {
    errors.push(`${where}.scopes: must be a list of non-empty strings`);
  }
  if (errors.length > before) return undefined;
  const pattern = path as string;
  const wildcard = segments[segments.length - 1] === '*';
  const fixed = wildcard ? segments.slice(0, -1) : segments;
  return {
    methods,
    pattern,
    scopes: [...(scopes as string[])],
    match(p: string): boolean {
      const parts = p.split('/');
      parts.shift();
      if (wildcard ? parts.length <= fixed.length : parts.length !== fixed.length) return false;
      for (let i = 0; i < fixed.length; i++) {
        const seg = fixed[i] as string;
        const got = parts[i] as string;
        if (seg.startsWith(':') ? got.length === 0 : seg !== got) return false;
      }
      return true;
    },
  };
}

export function findRoute(rules: readonly RouteRule[], method: string, path: string): RouteRule | undefined {
  for (const r of rules) {
    if ((r.methods === '*' || r.methods.has(method)) && r.match(path)) return r;
  }
  return undefined;
}
