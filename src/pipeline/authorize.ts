import { ipAllowed } from '../net/cidr.js';
import type { Policy } from '../policy/policy.js';
import type { RouteMatch } from '../policy/routes.js';
import { deny, type Denial } from '../errors.js';
import type { PreparedKey } from '../keys/prepared-key.js';

/**
 * Authorization for an authenticated key (all failures 403 10403):
 * the caller's IP must be on the key's allow-list when it has one, the route
 * (matched once by the gateway, for both methods when an allowed override asks
 * for another) must be listed unless unlistedRoutes is "allow", and the key
 * must hold every scope the route requires.
 */
export function authorize(
  key: PreparedKey,
  clientIp: string | undefined,
  route: RouteMatch | undefined,
  unlistedRoutes: Policy['unlistedRoutes'],
): { ok: true; route: string } | Denial {
  if (key.allowList && (clientIp === undefined || !ipAllowed(key.allowList, clientIp))) {
    return deny('ip_denied');
  }
  if (!route) return unlistedRoutes === 'allow' ? { ok: true, route: 'unlisted' } : deny('route_not_listed');
  // An allowed method override where only one of the two methods is listed: unlisted for the other.
  if (route.partial && unlistedRoutes === 'deny') return deny('route_not_listed');
  for (const scope of route.scopes) if (!key.scopes.has(scope)) return deny('scope_denied');
  return { ok: true, route: route.pattern };
}
