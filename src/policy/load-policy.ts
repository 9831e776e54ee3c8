import type { BlockList } from 'node:net';
import { parseCidrList } from '../net/cidr.js';
import { readDataFileWithLines } from '../files/read-data-file.js';
import { withSchemaProblems } from '../files/schema.js';
import { compileRouteTable } from './compile-route-table.js';
import { OVERRIDE_NAMES } from './method-override.js';
import { overlappingRules } from './overlapping-rules.js';
import { API_PREFIX, TIME_PATH, type Policy } from './policy.js';
import { compileRoute, isUnderPrefix, parseMatching, showRule, type RouteMatching, type RouteRule } from './routes.js';
import { readRegions } from './regions.js';
import { compileRateLimit, IP_POLICY_NAME, OWNER_POLICY_NAME, parseRateLimitSpec } from './rate-limit-spec.js';

type Settings = Record<string, unknown>;
type LineOf = (at: ReadonlyArray<string | number>) => number | undefined;
/** A compiled rule that also remembers its entry ("routes[3]") for messages about its fields. */
type ListedRule = RouteRule & { at: string };

/**
 * Reads and checks the policy file: first against its published schema
 * (config/schema/policy.schema.json), then what a schema cannot check (path
 * segments, CIDRs, limits against each other). Every problem is appended to
 * `problems`, each once, in the order the settings are read below.
 */
export function loadPolicy(file: string, problems: string[]): Policy {
  const found: string[] = [];
  const { data, lineOf, readable } = readPolicyFile(file, found);
  const o = (typeof data === 'object' && data !== null ? data : {}) as Settings;
  // Unknown settings are the schema's to report (additionalProperties: false).
  const matching = parseMatching(o, file, found);
  const routeRules = compileList(o.routes, 'routes', file, lineOf, found);
  for (const r of routeRules)
    if (!r.pattern.startsWith(API_PREFIX))
      found.push(`${file}: ${r.at}.path: route ${r.pattern} must start with /api/v3/`);
  const publicRules = compileList(o.public, 'public', file, lineOf, found);
  const publicApiRules = publicRules.filter((r) => underApi(r, matching));
  checkPublicApiRules(publicApiRules, routeRules, matching, file, found);
  const routes = compileRouteTable(routeRules, matching, found);
  const publicRoutes = compileRouteTable(
    publicRules.filter((r) => !underApi(r, matching)),
    matching,
    found,
  );
  const publicApiRoutes = compileRouteTable(publicApiRules, matching, found);
  const timeEndpoint = readTimeEndpoint(o, [...routeRules, ...publicApiRules], matching, file, found);
  const methodOverride = readMethodOverride(o, file, found);
  const unlisted = o.unlistedRoutes ?? 'deny';
  if (unlisted !== 'deny' && unlisted !== 'allow') found.push(`${file}: unlistedRoutes must be "deny" or "allow"`);
  const { trustedProxies, trustedProxyCidrs } = readTrustedProxies(o, file, found);
  const seconds = (name: string, def: number) => readSeconds(o, name, def, file, found);
  const defaultRecvWindowSeconds = seconds('defaultRecvWindowSeconds', 30);
  const maxRecvWindowSeconds = seconds('maxRecvWindowSeconds', 60);
  if (defaultRecvWindowSeconds > maxRecvWindowSeconds)
    found.push(`${file}: defaultRecvWindowSeconds must not exceed maxRecvWindowSeconds`);
  // `defaultRateLimit: { rate: 100/s, burst: 200 }`: the same shape as a key's own rateLimit.
  const rateLimitSpec = parseRateLimitSpec(o.defaultRateLimit, `${file}: defaultRateLimit`, found);
  // An owner's budget (for owners without their own) and the failed-authentication budget per IP.
  const ownerLimitSpec = parseRateLimitSpec(o.defaultOwnerRateLimit, `${file}: defaultOwnerRateLimit`, found);
  const failedAuthSpec = parseRateLimitSpec(o.failedAuthLimit, `${file}: failedAuthLimit`, found);
  const regions = readRegions(o, file, found);
  problems.push(...(readable ? withSchemaProblems('policy', data, file, found) : found));
  return {
    routes,
    publicRoutes,
    publicApiRoutes,
    timeEndpoint,
    matching,
    methodOverride,
    unlistedRoutes: unlisted === 'allow' ? 'allow' : 'deny',
    trustedProxies,
    trustedProxyCidrs,
    defaultRecvWindowSeconds,
    maxRecvWindowSeconds,
    defaultRateLimit: rateLimitSpec && compileRateLimit(rateLimitSpec),
    defaultOwnerRateLimit: ownerLimitSpec && compileRateLimit(ownerLimitSpec, OWNER_POLICY_NAME),
    failedAuthLimit: failedAuthSpec && compileRateLimit(failedAuthSpec, IP_POLICY_NAME),
    regions,
  };
}

/** The file's data and where each entry was written; an unreadable file reads as empty (and is reported). */
function readPolicyFile(file: string, found: string[]): { data: unknown; lineOf: LineOf; readable: boolean } {
  try {
    return { ...readDataFileWithLines(file), readable: true };
  } catch (err) {
    found.push(`KEYGATE_CONFIG: cannot read ${file}: ${(err as Error).message}`);
    return { data: {}, lineOf: () => undefined, readable: false };
  }
}

/** `routes` or `public`: each entry compiled; an entry with a problem is reported and left out. */
function compileList(value: unknown, name: string, file: string, lineOf: LineOf, found: string[]): ListedRule[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    found.push(`${file}: ${name} must be a list`);
    return [];
  }
  return value.flatMap((r, i) => {
    // The schema alone would call this "unknown setting (a typo?)": say why instead. A public route forwards
    // with no identity, so a stream on it could never be closed when a key stops being good.
    if (name === 'public' && typeof r === 'object' && r !== null && 'upgrade' in r) {
      found.push(
        `${file}: public[${i}].upgrade: upgrade: websocket needs an authenticated route (a public route never upgrades); list it under routes`,
      );
    }
    // Field problems name the entry as the schema does; the rule remembers its line too, so that
    // two routes that collide are reported with both lines.
    const rule = compileRoute(r, `${file}: ${name}[${i}]`, found);
    const line = lineOf([name, i]);
    return rule
      ? [{ ...rule, at: `${name}[${i}]`, where: `${rule.where}${line === undefined ? '' : ` (line ${line})`}` }]
      : [];
  });
}

/**
 * Read the way the upstream will: with case-insensitive matching "/API/v3/x" is under /api/v3/ too,
 * and so is "/api/v3" (a router mounted at the prefix serves it). Such a route is only ever matched against /api/v3/ paths.
 */
function underApi(r: RouteRule, matching: RouteMatching): boolean {
  return isUnderPrefix(r.pattern, API_PREFIX, matching);
}

/** Public /api/v3/ routes are opt-in, one by one: each names a fixed segment, none overlaps an authenticated route. */
function checkPublicApiRules(
  publicApiRules: readonly ListedRule[],
  routeRules: readonly ListedRule[],
  matching: RouteMatching,
  file: string,
  found: string[],
): void {
  for (const r of publicApiRules) {
    // "/api/v3/*", "/api/v3/:x/*", "/api/v3/:x": every path of that shape, present and future, would be open.
    if (
      !r.pattern
        .split('/')
        .slice(3)
        .some((seg) => seg !== '' && seg !== '*' && !seg.startsWith(':'))
    ) {
      found.push(
        `${file}: ${r.at}.path: public route ${r.pattern} names no fixed segment after /api/v3/, so it would open every /api/v3/ path of its shape without authentication; list the public /api/v3/ routes one by one`,
      );
    }
  }
  const overlap = overlappingRules(publicApiRules, routeRules, matching);
  for (const [open, closed] of overlap.pairs) {
    found.push(
      `${open.where} (public ${showRule(open)}) and ${closed.where.slice(file.length + 2)} (authenticated ${showRule(closed)}) could both match one request: a public /api/v3/ route may not overlap a route in routes`,
    );
  }
  if (!overlap.complete)
    found.push(
      `${file}: public: too many overlapping :param and * routes to check public /api/v3/ routes against routes; simplify them`,
    );
}

/** `timeEndpoint` (default true); while on, no /api/v3/ route may name TIME_PATH. */
function readTimeEndpoint(
  o: Settings,
  apiRules: readonly ListedRule[],
  matching: RouteMatching,
  file: string,
  found: string[],
): boolean {
  const timeEndpoint = o.timeEndpoint ?? true;
  if (typeof timeEndpoint !== 'boolean') found.push(`${file}: timeEndpoint must be true or false`);
  else if (timeEndpoint) {
    // Keygate answers GET /api/v3/time before any route is looked up: a route naming it would never be reached.
    for (const r of apiRules) {
      if (namesTimePath(r, matching))
        found.push(
          `${file}: ${r.at}.path: ${showRule(r)} is never reached while Keygate answers GET ${TIME_PATH} itself; set timeEndpoint: false to send that path to the upstream`,
        );
    }
  }
  return timeEndpoint !== false;
}

/** A GET (or HEAD) route whose pattern is the literal TIME_PATH under the policy's matching. */
function namesTimePath(r: RouteRule, matching: RouteMatching): boolean {
  if (r.methods !== '*' && !r.methods.has('GET') && !r.methods.has('HEAD')) return false;
  let p = matching.caseSensitive ? r.pattern : r.pattern.toLowerCase();
  if (matching.trailingSlash === 'ignore' && p.endsWith('/')) p = p.slice(0, -1);
  return p === TIME_PATH;
}

/** `methodOverride`: the override names the upstream may honour, lower-cased; none by default. */
function readMethodOverride(o: Settings, file: string, found: string[]): Set<string> {
  const overrides = o.methodOverride ?? [];
  const methodOverride = new Set<string>();
  if (
    !Array.isArray(overrides) ||
    overrides.some((n) => typeof n !== 'string' || !OVERRIDE_NAMES.includes(n.toLowerCase()))
  ) {
    found.push(`${file}: methodOverride must be a list of names among ${OVERRIDE_NAMES.join(', ')}`);
  } else {
    for (const n of overrides as string[]) methodOverride.add(n.toLowerCase());
  }
  return methodOverride;
}

function readTrustedProxies(
  o: Settings,
  file: string,
  found: string[],
): { trustedProxies: BlockList | null; trustedProxyCidrs: string[] } {
  const proxies = o.trustedProxies ?? [];
  if (!Array.isArray(proxies) || proxies.some((p) => typeof p !== 'string')) {
    found.push(`${file}: trustedProxies must be a list of CIDRs`);
    return { trustedProxies: null, trustedProxyCidrs: [] };
  }
  if (proxies.length === 0) return { trustedProxies: null, trustedProxyCidrs: [] };
  const parsed = parseCidrList(proxies as string[], `${file}: trustedProxies`);
  found.push(...parsed.errors);
  return { trustedProxies: parsed.list, trustedProxyCidrs: proxies as string[] };
}

function readSeconds(o: Settings, name: string, def: number, file: string, found: string[]): number {
  const v = o[name] ?? def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 3600) {
    found.push(`${file}: ${name} must be an integer number of seconds between 1 and 3600`);
    return def;
  }
  return v;
}
