// Tested in test/unit/compile-route-table.test.ts, test/unit/overlapping-rules.test.ts.
import { orderProblem } from './order-problem.js';
import { buildRouteTrie, upperEscapes, type RouteTrie, type Shape, type TrieNode } from './route-trie.js';
import type { RouteMatching, RouteRule } from './routes.js';

/**
 * One route list under one matching, compiled into a deterministic automaton
 * over path segments. Several trie nodes (route-trie.ts) can match the same
 * prefix (a literal and a `:param`, say), so the states are the sets of trie
 * positions a prefix can be at (the subset construction), each state knowing,
 * for every method, the first listed route that accepts there.
 */
export interface Automaton {
  readonly states: number;
  match(method: string, path: string): RouteRule | undefined;
  /** Pairs of rule indexes "i,j" (i < j) that accept at least one common path. */
  readonly overlaps: ReadonlySet<string>;
  /** False when MAX_STATES stopped the construction: the table, and `overlaps`, are incomplete. */
  readonly complete: boolean;
}

/** A policy whose automaton would be larger than this is refused at load (none seen in practice comes close). */
export const MAX_STATES = 200_000;

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

/** Same-route, too-many-states and listing-order findings go to `problems`, each once. */
export function compileAutomaton(
  rules: readonly RouteRule[],
  matching: RouteMatching,
  problems: Set<string>,
): Automaton {
  const trie = buildRouteTrie(rules, matching, problems);
  const built = buildStates(rules, trie, matching.trailingSlash === 'ignore');
  if (!built.complete) {
    problems.add(
      `routes: the policy compiles to more than ${MAX_STATES} matching states; simplify overlapping :param and * routes`,
    );
  }
  for (const key of built.overlaps) {
    const [a, b] = key.split(',').map(Number) as [number, number];
    const problem = orderProblem(
      rules[a] as RouteRule,
      trie.shapes[a] as Shape,
      rules[b] as RouteRule,
      trie.shapes[b] as Shape,
    );
    if (problem) problems.add(problem);
  }
  return {
    states: built.count,
    overlaps: built.overlaps,
    complete: built.complete,
    match: matcher(built.root, !matching.caseSensitive),
  };
}

interface Construction {
  readonly rules: readonly RouteRule[];
  readonly nodes: readonly TrieNode[];
  readonly ignore: boolean;
  readonly overlaps: Set<string>;
  /** The state for a set of positions, queued for filling when new; undefined for none, or past MAX_STATES. */
  stateOf(positions: number[]): State | undefined;
}

/** Subset construction, breadth first from the root, until every state is filled or MAX_STATES is reached. */
function buildStates(
  rules: readonly RouteRule[],
  trie: RouteTrie,
  ignore: boolean,
): { root: State; count: number; overlaps: Set<string>; complete: boolean } {
  const states = new Map<string, State>();
  const queue: Array<[State, number[]]> = [];
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
  const c: Construction = { rules, nodes: trie.nodes, ignore, overlaps: new Set(), stateOf };
  const root = stateOf([pos(trie.root, AT)]) as State;
  for (let q = 0; q < queue.length && !tooBig; q++) fillState(c, ...(queue[q] as [State, number[]]));
  return { root, count: states.size, overlaps: c.overlaps, complete: !tooBig };
}

/** One state's transitions (per literal, any other segment, the empty segment) and what it accepts. */
function fillState(c: Construction, state: State, positions: number[]): void {
  const at: TrieNode[] = [];
  const wilds: number[] = [];
  const accepted: number[] = [];
  for (const p of positions) {
    const node = c.nodes[Math.floor(p / 3)] as TrieNode;
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
    state.lit.set(k, c.stateOf(next) as State);
  }
  state.other = c.stateOf(common());
  // An empty segment can only be the last (step 1 refuses "//"): a `*` may take it, a strict "/a/" names it,
  // and with the trailing slash ignored it ends a route where the path before it would have.
  const empty = [...wilds];
  for (const n of at) {
    if (n.wild.length > 0) empty.push(pos(n, WILD));
    const child = n.lit.get('');
    if (child) empty.push(pos(child, AT));
    if (c.ignore && n.end.length > 0) empty.push(pos(n, TRAIL));
  }
  state.empty = c.stateOf(empty);
  if (accepted.length > 0) state.accept = acceptFor(c.rules, accepted, c.overlaps);
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

/** The per-request walk: one map lookup per segment, no allocation beyond the segment string. */
function matcher(rootState: State, lower: boolean): Automaton['match'] {
  return (method: string, path: string): RouteRule | undefined => {
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
  };
}
