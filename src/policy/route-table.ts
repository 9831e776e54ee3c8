import { showRule, type RouteMatch, type RouteMatching, type RouteRule } from './routes.js';

/**
 * A policy's routes compiled once, at load, into a deterministic automaton
 * over path segments: a request walks its path's segments once, with one map
 * lookup per segment, whatever the number of routes. No backtracking, no
 * per-rule work, so the cost of a hostile path does not grow with the policy.
 *
 * How: the patterns form a segment trie (literal children, one `:param`
 * child, a final `*`). Several trie nodes can match the same prefix (a literal
 * and a `:param`, say), so the table's states are the sets of trie positions
 * a prefix can be at (the subset construction), each state knowing, for every
 * method, the first listed route that accepts there.
 *
 * Loading also refuses policies whose meaning would depend on the upstream's
 * router: two routes that are the same under the chosen matching (reported with
 * both lines), and overlapping routes listed less specific first, where Express
 * (first listed wins) and Fastify, Spring, Go or ASP.NET (most specific wins)
 * would run different handlers.
 */
export interface RouteTable {
  readonly rules: readonly RouteRule[];
  readonly matching: RouteMatching;
  /** Number of compiled states (reported at load; bounded by MAX_STATES). */
  readonly states: number;
  /**
   * The first listed route for this method and path, HEAD falling back to GET.
   * With case folded or the trailing slash ignored, the path is also read
   * exactly (as a case-sensitive, strict router would); when the two readings
   * reach different routes, the answer carries both routes' scopes, so the
   * folding defaults are never weaker than an upstream that does not fold.
   */
  match(method: string, path: string): RouteMatch | undefined;
}

const EXACT: RouteMatching = Object.freeze({ caseSensitive: true, trailingSlash: 'strict' });

export function compileRouteTable(
  rules: readonly RouteRule[],
  matching: RouteMatching,
  problems: string[],
): RouteTable {
  const found = new Set<string>();
  const folded = compileAutomaton(rules, matching, found);
  const exact =
    matching.caseSensitive && matching.trailingSlash === 'strict' ? folded : compileAutomaton(rules, EXACT, new Set());
  problems.push(...found);
  return {
    rules,
    matching,
    states: folded.states + (exact === folded ? 0 : exact.states),
    match(method: string, path: string): RouteMatch | undefined {
      const a = folded.match(method, path);
      if (exact === folded) return a;
      const b = exact.match(method, path);
      // b without a cannot happen (folding only merges paths); a without b: a spelling of a listed route.
      if (!b || a === b || !a) return a ?? b;
      return { pattern: a.pattern, scopes: a.scopes.concat(b.scopes.filter((x) => !a.scopes.includes(x))) };
    },
  };
}

/**
 * The route a request is authorized against. `methods` is the request method,
 * and second, the method an allowed override header or `_method` asks for
 * (src/pipeline/check-override.ts): then both must be authorized, so the
 * scopes of both routes are required.
 */
export function findRoute(table: RouteTable, methods: readonly string[], path: string): RouteMatch | undefined {
  const first = table.match(methods[0] as string, path);
  if (methods.length === 1) return first;
  const second = table.match(methods[1] as string, path);
  if (!first || !second) {
    const found = first ?? second;
    return found && { pattern: found.pattern, scopes: found.scopes, partial: true };
  }
  if (first === second) return first;
  // The upstream runs the overridden method's handler: log that pattern, require both routes' scopes.
  return { pattern: second.pattern, scopes: [...new Set([...first.scopes, ...second.scopes])] };
}

interface Automaton {
  readonly states: number;
  match(method: string, path: string): RouteRule | undefined;
  /** Pairs of rule indexes "i,j" (i < j) that accept at least one common path. */
  readonly overlaps: ReadonlySet<string>;
  /** False when MAX_STATES stopped the construction: the table, and `overlaps`, are incomplete. */
  readonly complete: boolean;
}

/** A policy whose automaton would be larger than this is refused at load (none seen in practice comes close). */
export const MAX_STATES = 200_000;

interface TrieNode {
  readonly id: number;
  readonly depth: number;
  readonly lit: Map<string, TrieNode>;
  param: TrieNode | undefined;
  /** Rules whose pattern ends here. */
  readonly end: number[];
  /** Rules whose pattern is this node's path followed by `*`. */
  readonly wild: number[];
}

interface Accept {
  readonly byMethod: ReadonlyMap<string, RouteRule>;
  readonly any: RouteRule | undefined;
}

interface State {
  readonly lit: Map<string, State>;
  other: State | undefined;
  empty: State | undefined;
  accept: Accept | undefined;
}

// Positions in the trie, encoded as numbers: node (at it), wild (inside its `*`), trail (past it by one trailing "/").
const AT = 0;
const WILD = 1;
const TRAIL = 2;
const pos = (node: TrieNode, kind: number) => node.id * 3 + kind;

type Shape = Array<{ kind: 'lit'; value: string } | { kind: 'param' } | { kind: 'wild' }>;

function compileAutomaton(rules: readonly RouteRule[], matching: RouteMatching, problems: Set<string>): Automaton {
  const canon = canonicalizer(matching);
  const nodes: TrieNode[] = [];
  const newNode = (depth: number): TrieNode => {
    const n: TrieNode = { id: nodes.length, depth, lit: new Map(), param: undefined, end: [], wild: [] };
    nodes.push(n);
    return n;
  };
  const root = newNode(0);
  const shapes: Shape[] = [];

  rules.forEach((rule, index) => {
    const segments = rule.pattern.split('/').slice(1);
    // With the trailing slash ignored, "/a/b/" is the route "/a/b" (and "/" is the root).
    if (matching.trailingSlash === 'ignore' && segments[segments.length - 1] === '') segments.pop();
    const shape: Shape = segments.map((s) =>
      s === '*' ? { kind: 'wild' } : s.startsWith(':') ? { kind: 'param' } : { kind: 'lit', value: canon(s) },
    );
    shapes.push(shape);
    let node = root;
    for (const step of shape) {
      if (step.kind === 'wild') break;
      if (step.kind === 'param') node = node.param ??= newNode(node.depth + 1);
      else {
        let next = node.lit.get(step.value);
        if (!next) node.lit.set(step.value, (next = newNode(node.depth + 1)));
        node = next;
      }
    }
    const list = shape[shape.length - 1]?.kind === 'wild' ? node.wild : node.end;
    for (const other of list) {
      if (sameMethods(rules[other] as RouteRule, rule)) {
        const first = rules[other] as RouteRule;
        problems.add(
          `${first.where} and ${after(first, rule)} are the same route under ${describe(matching)}: ${showRule(first)} and ${showRule(rule)}`,
        );
      }
    }
    list.push(index);
  });

  // Subset construction, breadth first from the root.
  const states = new Map<string, State>();
  const queue: Array<[State, number[]]> = [];
  const overlaps = new Set<string>();
  let tooBig = false;
  const stateOf = (positions: number[]): State | undefined => {
    if (positions.length === 0) return undefined;
    const unique = [...new Set(positions)].sort((a, b) => a - b);
    const key = unique.join(',');
    let s = states.get(key);
    if (s) return s;
    if (states.size >= MAX_STATES) {
      tooBig = true;
      return undefined;
    }
    s = { lit: new Map(), other: undefined, empty: undefined, accept: undefined };
    states.set(key, s);
    queue.push([s, unique]);
    return s;
  };
  const rootState = stateOf([pos(root, AT)]) as State;
  const ignore = matching.trailingSlash === 'ignore';

  for (let q = 0; q < queue.length && !tooBig; q++) {
    const [state, positions] = queue[q] as [State, number[]];
    const at: TrieNode[] = [];
    const wilds: number[] = [];
    const accepted: number[] = [];
    for (const p of positions) {
      const node = nodes[Math.floor(p / 3)] as TrieNode;
      const kind = p % 3;
      if (kind === AT) {
        at.push(node);
        accepted.push(...node.end);
      } else if (kind === WILD) {
        wilds.push(p);
        accepted.push(...node.wild);
      } else accepted.push(...node.end);
    }
    // A non-empty segment that no literal child names: every :param child, every `*` entered or already inside.
    const common = (): number[] => {
      const next = [...wilds];
      for (const n of at) {
        if (n.param) next.push(pos(n.param, AT));
        if (n.wild.length > 0) next.push(pos(n, WILD));
      }
      return next;
    };
    const keys = new Set<string>();
    for (const n of at) for (const k of n.lit.keys()) if (k !== '') keys.add(k);
    for (const k of keys) {
      const next = common();
      for (const n of at) {
        const child = n.lit.get(k);
        if (child) next.push(pos(child, AT));
      }
      state.lit.set(k, stateOf(next) as State);
    }
    state.other = stateOf(common());
    // An empty segment can only be the last (step 1 refuses "//"): a `*` may take it, a strict "/a/" names it,
    // and with the trailing slash ignored it ends a route where the path before it would have.
    const empty = [...wilds];
    for (const n of at) {
      if (n.wild.length > 0) empty.push(pos(n, WILD));
      const child = n.lit.get('');
      if (child) empty.push(pos(child, AT));
      if (ignore && n.end.length > 0) empty.push(pos(n, TRAIL));
    }
    state.empty = stateOf(empty);
    if (accepted.length > 0) state.accept = acceptFor(rules, accepted, overlaps);
  }
  if (tooBig) {
    problems.add(
      `routes: the policy compiles to more than ${MAX_STATES} matching states; simplify overlapping :param and * routes`,
    );
  }
  for (const key of overlaps) {
    const [a, b] = key.split(',').map(Number) as [number, number];
    const problem = orderProblem(rules[a] as RouteRule, shapes[a] as Shape, rules[b] as RouteRule, shapes[b] as Shape);
    if (problem) problems.add(problem);
  }

  const lower = !matching.caseSensitive;
  return {
    states: states.size,
    overlaps,
    complete: !tooBig,
    match(method: string, path: string): RouteRule | undefined {
      if (path.charCodeAt(0) !== 47 /* / */) return undefined;
      let s: State | undefined = rootState;
      let start = 1;
      const n = path.length;
      for (;;) {
        let end = path.indexOf('/', start);
        if (end === -1) end = n;
        if (end === start) s = s.empty;
        else {
          let seg = path.slice(start, end);
          if (lower) seg = seg.toLowerCase();
          else if (seg.includes('%')) seg = upperEscapes(seg);
          s = s.lit.get(seg) ?? s.other;
        }
        if (s === undefined) return undefined;
        if (end === n) break;
        start = end + 1;
      }
      const a = s.accept;
      return a && (a.byMethod.get(method) ?? a.any);
    },
  };
}

/**
 * Pairs of rules, one from each list, that some request could match both: a
 * path both patterns accept under `matching` (the folded reading, which accepts
 * every path the exact one does), with a method both take (HEAD taking a GET
 * route, as the table does). Built by the same construction as the table, on
 * the two lists together, so "could match" means exactly what matching does.
 */
export function overlappingRules(
  a: readonly RouteRule[],
  b: readonly RouteRule[],
  matching: RouteMatching,
): { pairs: Array<[RouteRule, RouteRule]>; complete: boolean } {
  const all = [...a, ...b];
  // Same-route and listing-order findings are about one list; each list's own table reports them.
  const automaton = compileAutomaton(all, matching, new Set());
  const pairs: Array<[RouteRule, RouteRule]> = [];
  for (const key of automaton.overlaps) {
    const [i, j] = key.split(',').map(Number) as [number, number];
    if (i >= a.length || j < a.length) continue;
    const x = all[i] as RouteRule;
    const y = all[j] as RouteRule;
    if (sameMethods(x, y) || (has(x, 'GET') && has(y, 'HEAD')) || (has(y, 'GET') && has(x, 'HEAD'))) pairs.push([x, y]);
  }
  return { pairs, complete: automaton.complete };
}

/** For each method, the first listed route among those accepting here; HEAD falls back to GET (every common router does). */
function acceptFor(rules: readonly RouteRule[], accepted: number[], overlaps: Set<string>): Accept {
  const order = [...new Set(accepted)].sort((a, b) => a - b);
  const first = new Map<string, number>();
  let any: number | undefined;
  for (const i of order) {
    const r = rules[i] as RouteRule;
    if (r.methods === '*') any ??= i;
    else for (const m of r.methods) if (!first.has(m)) first.set(m, i);
  }
  const head = Math.min(first.get('HEAD') ?? Infinity, first.get('GET') ?? Infinity);
  if (head !== Infinity) first.set('HEAD', head);
  const byMethod = new Map<string, RouteRule>();
  for (const [m, i] of first) byMethod.set(m, rules[any !== undefined && any < i ? any : i] as RouteRule);
  // Every pair accepting the same path is checked once, after construction.
  for (let x = 0; x < order.length; x++)
    for (let y = x + 1; y < order.length; y++) overlaps.add(`${order[x]},${order[y]}`);
  return { byMethod, any: any === undefined ? undefined : rules[any] };
}

const canonicalizer = (matching: RouteMatching) => (seg: string) =>
  matching.caseSensitive ? upperEscapes(seg) : seg.toLowerCase();

/** `%2a` and `%2A` are one character: compare escapes with upper-case hex. */
function upperEscapes(seg: string): string {
  return seg.includes('%') ? seg.replace(/%[0-9a-f]{2}/gi, (e) => e.toUpperCase()) : seg;
}

function sameMethods(a: RouteRule, b: RouteRule): boolean {
  if (a.methods === '*' || b.methods === '*') return true;
  for (const m of a.methods) if (b.methods.has(m)) return true;
  return false;
}

const has = (r: RouteRule, m: string) => r.methods === '*' || r.methods.has(m);

/** Kind ranks at one position: a literal beats a :param beats the end of a pattern beats a `*`. */
function rank(shape: Shape, i: number): number {
  const step = shape[i];
  if (!step) return 2;
  return step.kind === 'lit' ? 4 : step.kind === 'param' ? 3 : 1;
}

/**
 * `a` is listed before `b` and some path matches both. Express runs the first
 * listed, the other routers the most specific; they agree only if `a` is the
 * more specific (decided at the first position where the kinds differ).
 */
function orderProblem(a: RouteRule, sa: Shape, b: RouteRule, sb: Shape): string | undefined {
  const headVsGet =
    (has(a, 'GET') && !has(a, 'HEAD') && has(b, 'HEAD')) || (has(b, 'GET') && !has(b, 'HEAD') && has(a, 'HEAD'));
  if (!sameMethods(a, b) && !headVsGet) return undefined;
  for (let i = 0; i < Math.max(sa.length, sb.length); i++) {
    const ra = rank(sa, i);
    const rb = rank(sb, i);
    if (ra > rb) return undefined;
    if (rb > ra)
      return `${b.where} (${showRule(b)}) is more specific than ${after(b, a)} (${showRule(a)}) and some paths match both: list it first, so that every router picks the same route`;
    if (ra === 1) break; // both `*`: the same from here on
  }
  // Same shape, methods overlapping only through HEAD: an explicit HEAD route listed after a GET one.
  if (has(a, 'GET') && !has(a, 'HEAD') && has(b, 'HEAD'))
    return `${b.where} (${showRule(b)}) lists HEAD for a path ${after(b, a)} (${showRule(a)}) serves with GET: list the HEAD route first`;
  return undefined;
}

/** `second.where` without the file name when `first` already said it ("p.yaml: routes[0] (line 2) and routes[1] (line 4)"). */
function after(first: RouteRule, second: RouteRule): string {
  const cut = first.where.lastIndexOf(': ') + 2;
  return cut > 1 && second.where.startsWith(first.where.slice(0, cut)) ? second.where.slice(cut) : second.where;
}

function describe(m: RouteMatching): string {
  return `caseSensitiveRoutes: ${m.caseSensitive}, trailingSlash: ${m.trailingSlash}`;
}
