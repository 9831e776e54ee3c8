import { ipAllowed } from '../config/cidr.js';
import type { Policy } from '../config/load-config.js';
import type { RouteRule } from '../config/routes.js';
import { deny, type Denial } from '../errors.js';
import type { PreparedKey } from '../store/key-cache.js';

/**
 * Authorization for an authenticated key (all failures 403 10403):
 * the caller's IP must be on the key's allow-list when it has one, the route
 * (matched once by the gateway) must be listed unless unlistedRoutes is
 * "allow", and the key must hold every scope the route requires.
 */
export function authorize(
  key: PreparedKey,
  clientIp: string | undefined,
  route: RouteRule | undefined,
  unlistedRoutes: Policy['unlistedRoutes'],
): { ok: true; route: string } | Denial {
  if (key.allowList && (clientIp === undefined || !ipAllowed(key.allowList, clientIp))) {
    return deny('ip_denied');
  }
  if (!route) return unlistedRoutes === 'allow' ? { ok: true, route: 'unlisted' } : deny('route_not_listed');
  for (const scope of route.scopes) if (!key.scopes.has(scope)) return deny('scope_denied');
  return { ok: true, route: route.pattern };
}
