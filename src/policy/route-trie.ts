// Tested in test/unit/compile-route-table.test.ts, test/unit/find-route.test.ts.
import { sameMethods, showRule, whereAfter, type RouteMatching, type RouteRule } from './routes.js';

/**
 * The first stage of compiling a route list: the patterns as a segment trie
 * (literal children, one `:param` child, a final `*`), literals canonical
 * under the matching (case folded, or escapes upper-cased). Two rules ending
 * at the same node with a method in common are the same route: reported with
 * both lines.
 */
export interface TrieNode {
  readonly id: number;
  readonly depth: number;
  readonly lit: Map<string, TrieNode>;
  param: TrieNode | undefined;
  /** Rules whose pattern ends here. */
  readonly end: number[];
  /** Rules whose pattern is this node's path followed by `*`. */
  readonly wild: number[];
}

/** A pattern's segments by kind, kept for the listing-order lint (order-problem.ts). */
export type Shape = Array<{ kind: 'lit'; value: string } | { kind: 'param' } | { kind: 'wild' }>;

export interface RouteTrie {
  readonly root: TrieNode;
  /** Every node, indexed by id. */
  readonly nodes: readonly TrieNode[];
  /** Each rule's shape, by rule index. */
  readonly shapes: readonly Shape[];
}

export function buildRouteTrie(rules: readonly RouteRule[], matching: RouteMatching, problems: Set<string>): RouteTrie {
  const canon = (seg: string) => (matching.caseSensitive ? upperEscapes(seg) : seg.toLowerCase());
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
      const first = rules[other] as RouteRule;
      if (sameMethods(first, rule))
        problems.add(
          `${first.where} and ${whereAfter(first, rule)} are the same route under ${describe(matching)}: ${showRule(first)} and ${showRule(rule)}`,
        );
    }
    list.push(index);
  });
  return { root, nodes, shapes };
}

/** `%2a` and `%2A` are one character: compare escapes with upper-case hex. */
export function upperEscapes(seg: string): string {
  return seg.includes('%') ? seg.replace(/%[0-9a-f]{2}/gi, (e) => e.toUpperCase()) : seg;
}

function describe(m: RouteMatching): string {
  return `caseSensitiveRoutes: ${m.caseSensitive}, trailingSlash: ${m.trailingSlash}`;
}
