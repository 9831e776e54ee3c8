// Tested in test/unit/request-plan.test.ts, test/adversarial/request-path.test.ts.
import type { BlockList } from 'node:net';
import { API_PREFIX, type Policy } from '../policy/policy.js';
import { findApiRoute, findRoute } from '../policy/find-route.js';
import { isUnderPrefix, type RouteMatch } from '../policy/routes.js';

/**
 * What the request path does with a request once its route is known: pass it with no key (a public
 * route), authenticate it against the route (its scopes and cost), or refuse it (outside /api/v3/ and
 * not public). `route` is what is logged and authorized against; `api` whether the path is under /api/v3/.
 */
export interface RouteDecision {
  readonly api: boolean;
  readonly isPublic: boolean;
  readonly route: RouteMatch | undefined;
}

/**
 * A policy as the request path runs it, compiled once per policy (at its first request after a load or
 * a reload, request-path.ts): the policy-wide decisions read as fields, and one RouteDecision per route
 * made once and handed to every request that matches it, so a request builds no decision of its own
 * (only a request matched against two routes at once, an allowed method override or the bare prefix
 * under a strict trailing slash, gets a fresh one).
 */
export interface RequestPlan {
  readonly policy: Policy;
  readonly trustedProxies: BlockList | null;
  readonly timeEndpoint: boolean;
  readonly methodOverride: ReadonlySet<string>;
  readonly unlistedRoutes: Policy['unlistedRoutes'];
  /** The route decision for a checked path and its method(s), matched the way the upstream's router reads it. */
  decide(methods: readonly string[], path: string): RouteDecision;
}

const NOT_OURS: RouteDecision = Object.freeze({ api: false, isPublic: false, route: undefined });
const UNLISTED: RouteDecision = Object.freeze({ api: true, isPublic: false, route: undefined });

export function compileRequestPlan(policy: Policy): RequestPlan {
  const { publicRoutes, publicApiRoutes, routes, matching } = policy;
  // No public /api/v3/ route (the usual policy): an API request skips that lookup.
  const publicApi = publicApiRoutes.rules.length > 0;
  // One decision per route object the tables hand out; made at the first request that meets it.
  const made = new WeakMap<RouteMatch, RouteDecision>();
  const decision = (api: boolean, isPublic: boolean, route: RouteMatch, shared: boolean): RouteDecision => {
    if (!shared) return { api, isPublic, route };
    let d = made.get(route);
    if (d === undefined) {
      d = Object.freeze({ api, isPublic, route });
      made.set(route, d);
    }
    return d;
  };
  return Object.freeze({
    policy,
    trustedProxies: policy.trustedProxies,
    timeEndpoint: policy.timeEndpoint,
    methodOverride: policy.methodOverride,
    unlistedRoutes: policy.unlistedRoutes,
    /**
     * Public routes first: under /api/v3/ only the operator's opt-ins, which load refused to let overlap
     * `routes`. A public match for only one of two methods (an override) is not public: it is authenticated.
     */
    decide(methods: readonly string[], path: string): RouteDecision {
      // One method: the tables' own route objects (stable for the policy's life); two: a merge made now.
      const shared = methods.length === 1;
      const api = isUnderPrefix(path, API_PREFIX, matching);
      if (!api) {
        const open = findRoute(publicRoutes, methods, path);
        return open === undefined ? NOT_OURS : decision(false, open.partial !== true, open, shared);
      }
      const open = publicApi ? findRoute(publicApiRoutes, methods, path) : undefined;
      if (open !== undefined && open.partial !== true) return decision(true, true, open, shared);
      const route = findApiRoute(routes, methods, path, API_PREFIX);
      // (The bare prefix under a strict trailing slash may merge two routes into a new object: its
      // decision is kept only as long as that object lives, which is the request.)
      return route === undefined ? UNLISTED : decision(true, false, route, shared);
    },
  });
}
