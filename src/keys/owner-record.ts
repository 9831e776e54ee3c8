// Tested in test/e2e/keys-file-owners.test.ts, test/e2e/owner-limits.test.ts, test/unit/keys-actions.test.ts.
import { parseRateLimitSpec, type RateLimitSpec } from '../policy/rate-limit-spec.js';
import { REGION_NAME, REGION_NAME_RULE } from '../policy/regions.js';
import { OWNER, OWNER_RULE } from './key-record.js';

const OWNER_FIELDS = new Set(['rateLimit', 'updatedAt', 'home', 'homeMovedAtMs']);

/**
 * An owner's own settings: today its rate limit, a budget shared by every key whose
 * `owner` it is, taking precedence over the policy's `defaultOwnerRateLimit`. An owner without a
 * record has no settings of its own (the policy's default applies, if any). Written by
 * `keygate owners set` / PUT /v1/owners/{owner} (Redis) or the keys file's top-level `owners:`
 * (embedded).
 */
export interface OwnerRecord {
  readonly owner: string;
  readonly rateLimit?: RateLimitSpec;
  /** When an operator last set it (ISO 8601); absent for the keys file's owners. */
  readonly updatedAt?: string;
  /** Regions: the home of every key of this owner (its budget and theirs on one Redis; docs/regions.md). */
  readonly home?: string;
  /** Regions: when `home` last changed (keystore TIME, ms). */
  readonly homeMovedAtMs?: number;
}

/** Checks an owner name (the keys' `owner` alphabet); pushes a problem to `errors`. */
export function checkOwnerName(owner: string, where: string, errors: string[]): boolean {
  if (OWNER.test(owner)) return true;
  errors.push(`${where}: ${OWNER_RULE}`);
  return false;
}

/** Validates an untrusted `{ rateLimit?: {...}, updatedAt? }` for `owner` (keys file, Redis, API body). */
export function parseOwnerSettings(
  owner: string,
  input: unknown,
  where: string,
  errors: string[],
): OwnerRecord | undefined {
  const before = errors.length;
  checkOwnerName(owner, where, errors);
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    errors.push(`${where}: must be an object like { rateLimit: { rate: "100/s", burst: 200 } }`);
    return undefined;
  }
  const o = input as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!OWNER_FIELDS.has(k)) errors.push(`${where}: unknown field ${JSON.stringify(k)}`);
  const rateLimit = parseRateLimitSpec(o.rateLimit, `${where}.rateLimit`, errors);
  if (o.updatedAt !== undefined && typeof o.updatedAt !== 'string') errors.push(`${where}.updatedAt: must be a string`);
  if (o.home !== undefined && (typeof o.home !== 'string' || !REGION_NAME.test(o.home)))
    errors.push(`${where}.home: ${REGION_NAME_RULE}`);
  if (o.homeMovedAtMs !== undefined && !Number.isSafeInteger(o.homeMovedAtMs))
    errors.push(`${where}.homeMovedAtMs: must be an integer (ms since the epoch)`);
  if (errors.length > before) return undefined;
  return {
    owner,
    ...(rateLimit !== undefined && { rateLimit }),
    ...(typeof o.updatedAt === 'string' && { updatedAt: o.updatedAt }),
    ...(typeof o.home === 'string' && { home: o.home }),
    ...(typeof o.homeMovedAtMs === 'number' && { homeMovedAtMs: o.homeMovedAtMs }),
  };
}

/** The keys file's top-level `owners: { <owner>: { rateLimit: {...} } }` (absent: none). */
export function parseOwnersMap(input: unknown, where: string, errors: string[]): OwnerRecord[] {
  if (input === undefined || input === null) return [];
  if (typeof input !== 'object' || Array.isArray(input)) {
    errors.push(`${where}: must be a map of owner → { rateLimit: { rate, burst } }`);
    return [];
  }
  const out: OwnerRecord[] = [];
  for (const [owner, settings] of Object.entries(input as Record<string, unknown>)) {
    const r = parseOwnerSettings(owner, settings, `${where}.${owner}`, errors);
    if (r) out.push(r);
  }
  return out;
}

/** What is stored and shown of an owner: its settings without the name (the name is the map key / path). */
export function ownerSettings(r: OwnerRecord): {
  rateLimit?: RateLimitSpec;
  updatedAt?: string;
  home?: string;
  homeMovedAtMs?: number;
} {
  return {
    ...(r.rateLimit && { rateLimit: r.rateLimit }),
    ...(r.updatedAt && { updatedAt: r.updatedAt }),
    ...(r.home !== undefined && { home: r.home }),
    ...(r.homeMovedAtMs !== undefined && { homeMovedAtMs: r.homeMovedAtMs }),
  };
}

/** The owner as the CLI and the API print it: its limit (null when it has none of its own). */
export function ownerView(r: OwnerRecord) {
  return {
    owner: r.owner,
    rateLimit: r.rateLimit ?? null,
    updatedAt: r.updatedAt ?? null,
    ...(r.home !== undefined && { home: r.home }),
  };
}
