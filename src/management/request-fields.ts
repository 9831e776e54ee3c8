// Tested in test/unit/management-routes.test.ts, test/e2e/management-api.test.ts.
import type { CredentialInput, KeyChanges } from '../keys/key-changes.js';
import { isKeyAlg } from '../keys/public-key.js';
import type { RateLimitSpec } from '../policy/rate-limit-spec.js';

/**
 * Reading a management request's body and query into typed values, collecting
 * every problem (so one answer lists them all). Only shapes and types are
 * checked here; the values themselves (scopes, CIDRs, rate, dates) are checked
 * afterwards by the keys file's own parser (parseKeyRecord), so the API accepts
 * exactly what the keys file and the CLI accept.
 */

/** The body as an object; every unknown field is a problem. */
export function fields(body: unknown, allowed: readonly string[], problems: string[]): Record<string, unknown> {
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    problems.push('body: must be a JSON object');
    return {};
  }
  const o = body as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!allowed.includes(k)) problems.push(`body.${k}: unknown field (allowed: ${allowed.join(', ')})`);
  return o;
}

function stringList(o: Record<string, unknown>, name: string, problems: string[]): string[] | undefined {
  const v = o[name];
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) {
    problems.push(`body.${name}: must be a list of strings`);
    return undefined;
  }
  return v as string[];
}

export function text(o: Record<string, unknown>, name: string, max: number, problems: string[]): string | undefined {
  const v = o[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    problems.push(`body.${name}: must be a string of 1 to ${max} characters`);
    return undefined;
  }
  return v;
}

/** The changes PATCH and POST /v1/keys share; `nullable` (PATCH) lets null remove an expiry or a limit. */
export function changesOf(o: Record<string, unknown>, problems: string[], nullable: boolean): KeyChanges {
  const changes: KeyChanges = {};
  const scopes = stringList(o, 'scopes', problems);
  if (scopes) changes.scopes = scopes;
  const allowIps = stringList(o, 'allowIps', problems);
  if (allowIps) changes.allowIps = allowIps;
  const label = text(o, 'label', 200, problems);
  if (label !== undefined) changes.label = label;
  if (o.expiresAt === null && nullable) changes.expiresAt = null;
  else if (o.expiresAt !== undefined) {
    const t = typeof o.expiresAt === 'string' ? Date.parse(o.expiresAt) : Number.NaN;
    if (Number.isNaN(t))
      problems.push(`body.expiresAt: an ISO 8601 date and time${nullable ? ', or null to remove the expiry' : ''}`);
    else changes.expiresAt = new Date(t).toISOString();
  }
  if (o.binding !== undefined) {
    if (o.binding === 'off' || o.binding === 'required') changes.binding = o.binding;
    else problems.push('body.binding: must be "off" or "required"');
  }
  if (o.home !== undefined) {
    if (typeof o.home === 'string') changes.home = o.home;
    else problems.push('body.home: must be a region name listed under regions:');
  }
  if (o.rateLimit === null && nullable) changes.rateLimit = null;
  else if (o.rateLimit !== undefined) {
    // Its shape and values are the keys file's: parseKeyRecord reports them.
    changes.rateLimit = o.rateLimit as RateLimitSpec;
  }
  return changes;
}

/** Every query parameter must be one of `allowed`, each given at most once. */
export function onlyParams(query: URLSearchParams, allowed: readonly string[], problems: string[]): void {
  for (const k of new Set(query.keys())) {
    if (!allowed.includes(k)) problems.push(`query.${k}: unknown parameter (allowed: ${allowed.join(', ') || 'none'})`);
    else if (query.getAll(k).length > 1) problems.push(`query.${k}: given more than once`);
  }
}

/** `alg` and `publicKey` of a create or rotate; whether the PEM is of the alg's key type is parseKeyRecord's rule. */
export function credentialOf(o: Record<string, unknown>, problems: string[]): CredentialInput {
  const out: CredentialInput = {};
  if (o.alg !== undefined) {
    if (isKeyAlg(o.alg)) out.alg = o.alg;
    else problems.push('body.alg: must be "HS256", "EdDSA" or "ES256"');
  }
  if (o.publicKey !== undefined) {
    if (typeof o.publicKey === 'string' && o.publicKey.length > 0 && o.publicKey.length <= 4096)
      out.publicKey = o.publicKey;
    else problems.push('body.publicKey: an SPKI PEM string (at most 4096 characters)');
  }
  return out;
}
