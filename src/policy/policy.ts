// Tested in test/unit/load-policy.test.ts, test/unit/find-route.test.ts.
import type { PolicyRegions } from './regions.js';
import type { BlockList } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { CompiledLimit } from './rate-limit-spec.js';
import type { RouteTable } from './route-table.js';
import type { RouteMatching } from './routes.js';

/** Every request under this prefix is authenticated, unless the policy lists it in `public`. */
export const API_PREFIX = '/api/v3/';
/** Served by Keygate itself (timeEndpoint, on by default), without authentication, so clients can measure their clock drift. */
export const TIME_PATH = '/api/v3/time';

export const DEFAULT_ROUTES_FILE = fileURLToPath(new URL('../../config/routes.yaml', import.meta.url));

/** From the routes/policy file (KEYGATE_CONFIG). */
export interface Policy {
  /** The /api/v3/ routes, compiled once (src/policy/compile-route-table.ts). */
  readonly routes: RouteTable;
  /** Paths outside /api/v3/ forwarded without authentication, same matcher. */
  readonly publicRoutes: RouteTable;
  /**
   * The `public` entries under /api/v3/ (opt-in, none by default): forwarded without
   * authentication and without identity. Load refuses any that overlaps `routes` or
   * names no fixed segment after /api/v3/.
   */
  readonly publicApiRoutes: RouteTable;
  /** Keygate answers GET /api/v3/time itself (default); false sends that path on like any other. */
  readonly timeEndpoint: boolean;
  /** How paths are compared with patterns (caseSensitiveRoutes, trailingSlash). */
  readonly matching: RouteMatching;
  /** Override headers (lower-case) and `_method` the upstream may honour; any other is refused. */
  readonly methodOverride: ReadonlySet<string>;
  /** What to do with an authenticated request to an /api/v3/ route the file does not list. */
  readonly unlistedRoutes: 'deny' | 'allow';
  readonly trustedProxies: BlockList | null;
  readonly trustedProxyCidrs: readonly string[];
  readonly defaultRecvWindowSeconds: number;
  readonly maxRecvWindowSeconds: number;
  /** The limit of keys without their own rateLimit (undefined = such keys are not limited). */
  readonly defaultRateLimit: CompiledLimit | undefined;
  /** The budget of owners without their own limit, shared by all their keys (undefined = none). */
  readonly defaultOwnerRateLimit: CompiledLimit | undefined;
  /** The failed-authentication budget per client IP (undefined = off). */
  readonly failedAuthLimit: CompiledLimit | undefined;
  /**
   * Regions (docs/regions.md): every region's request-state Redis and the default home; undefined = no regions.
   * Read at start only (src/config/read-regions.ts): a reload that changes it is reported and not applied.
   */
  readonly regions?: PolicyRegions | undefined;
}
