import type { ManagementError } from '../errors.js';
import { OWNER, OWNER_RULE, publicView, type KeyRecord, type KeyStatus } from '../keys/key-record.js';
import type { Done, KeyChanges, KeyOperations, NewKeyInput } from './key-operations.js';
import { lastUsedAt, parseUsageDays, usageReport, USAGE_DAYS_RULE } from '../keys/key-usage.js';
import type { RateLimitSpec } from '../policy/rate-limit-spec.js';
import type { Store } from '../store/store.js';

/** What a handler decided: a JSON answer, or a catalogue error (src/errors.ts MANAGEMENT_ERRORS). */
export type Answer =
  | { readonly status: number; readonly body?: unknown; readonly headers?: Readonly<Record<string, string>> }
  | { readonly error: ManagementError; readonly message?: string; readonly problems?: readonly string[] };

/** One call, already authenticated and authorised, its body parsed. */
export interface Call {
  readonly apiKey: string | undefined;
  readonly query: URLSearchParams;
  /** The parsed JSON body; undefined when the request had none. */
  readonly body: unknown;
  /** The token's name: the actor in the audit stream. */
  readonly actor: string;
  readonly idempotencyKey: string | undefined;
}

export interface RouteDeps {
  readonly ops: KeyOperations;
  readonly store: Pick<Store, 'getUsage'>;
  readonly now: () => number;
}

export interface Route {
  /** Shown in logs (never the apiKey itself). */
  readonly pattern: string;
  readonly method: string;
  readonly write: boolean;
  /** POST/PATCH: a JSON body is read (415/413/400 before the handler runs). */
  readonly body: boolean;
  handle(call: Call, deps: RouteDeps): Promise<Answer>;
}

const MAX_LIST = 500;
const MAX_GRACE_SECONDS = 30 * 86_400;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

const invalid = (problems: readonly string[]): Answer => ({ error: 'invalid_request', problems });

/** A key as every answer shows it: the keys file's field names, `status`, `lastUsedAt`; never a secret. */
async function view(record: KeyRecord, deps: RouteDeps): Promise<Record<string, unknown>> {
  return { ...publicView(record, deps.now()), lastUsedAt: lastUsedAt(await deps.store.getUsage(record.apiKey)) };
}

/** The record parser names fields "key.scopes"; in an answer they are the request's: "body.scopes". */
const asBody = (problems: readonly string[]) => problems.map((p) => p.replace(/^key\./, 'body.'));

/** A refused operation as an answer: 404, 400 (the record parser's problems) or 409. */
function refusal(r: Exclude<Done<unknown>, { ok: true }>): Answer {
  if (r.refused === 'not_found') return { error: 'not_found' };
  if (r.refused === 'invalid') return invalid(asBody(r.problems));
  return { error: 'conflict', message: r.message };
}

/**
 * Reads the fields a body may have; every unknown field and every field of the
 * wrong type is a problem. The values themselves (scopes, CIDRs, rate, dates) are
 * checked afterwards by the keys file's own parser (parseKeyRecord), so the API
 * accepts exactly what the keys file and the CLI accept.
 */
function fields(body: unknown, allowed: readonly string[], problems: string[]): Record<string, unknown> {
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

function text(o: Record<string, unknown>, name: string, max: number, problems: string[]): string | undefined {
  const v = o[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length === 0 || v.length > max) {
    problems.push(`body.${name}: must be a string of 1 to ${max} characters`);
    return undefined;
  }
  return v;
}

/** The changes PATCH and POST /v1/keys share. */
function changesOf(o: Record<string, unknown>, problems: string[], nullable: boolean): KeyChanges {
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
  if (o.rateLimit === null && nullable) changes.rateLimit = null;
  else if (o.rateLimit !== undefined) {
    // Its shape and values are the keys file's: parseKeyRecord reports them.
    changes.rateLimit = o.rateLimit as RateLimitSpec;
  }
  return changes;
}

const CREATE_FIELDS = ['owner', 'scopes', 'allowIps', 'label', 'expiresAt', 'rateLimit'] as const;
const PATCH_FIELDS = ['scopes', 'allowIps', 'label', 'expiresAt', 'rateLimit'] as const;
const STATES: readonly KeyStatus[] = ['active', 'revoked', 'expired'];

function onlyParams(query: URLSearchParams, allowed: readonly string[], problems: string[]) {
  for (const k of new Set(query.keys())) {
    if (!allowed.includes(k)) problems.push(`query.${k}: unknown parameter (allowed: ${allowed.join(', ') || 'none'})`);
    else if (query.getAll(k).length > 1) problems.push(`query.${k}: given more than once`);
  }
}

const cursorOf = (apiKey: string) => Buffer.from(apiKey).toString('base64url');
const CURSOR = /^[A-Za-z0-9_-]{1,200}$/;

export const ROUTES: readonly Route[] = [
  {
    pattern: '/v1/keys',
    method: 'GET',
    write: false,
    body: false,
    async handle({ query }, deps) {
      const problems: string[] = [];
      onlyParams(query, ['owner', 'state', 'limit', 'cursor'], problems);
      const owner = query.get('owner') ?? undefined;
      if (owner !== undefined && !OWNER.test(owner)) problems.push(`query.owner: ${OWNER_RULE}`);
      const state = query.get('state') ?? undefined;
      if (state !== undefined && !STATES.includes(state as KeyStatus))
        problems.push('query.state: one of active, revoked, expired');
      const rawLimit = query.get('limit') ?? '100';
      const limit = /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : 0;
      if (limit < 1 || limit > MAX_LIST) problems.push(`query.limit: a whole number from 1 to ${MAX_LIST}`);
      const rawCursor = query.get('cursor') ?? undefined;
      if (rawCursor !== undefined && !CURSOR.test(rawCursor))
        problems.push('query.cursor: not a cursor this API returned');
      if (problems.length > 0) return invalid(problems);
      const after = rawCursor === undefined ? undefined : Buffer.from(rawCursor, 'base64url').toString();
      // Ordered by apiKey: a cursor is the last apiKey seen, so keys added or removed meanwhile never shift a page.
      const all = (
        await deps.ops.list({
          ...(owner !== undefined && { owner }),
          ...(state !== undefined && { state: state as KeyStatus }),
        })
      ).filter((r) => after === undefined || r.apiKey > after);
      const page = all.slice(0, limit);
      const keys = await Promise.all(page.map((r) => view(r, deps)));
      const last = page[page.length - 1];
      return { status: 200, body: { keys, nextCursor: all.length > limit && last ? cursorOf(last.apiKey) : null } };
    },
  },
  {
    pattern: '/v1/keys',
    method: 'POST',
    write: true,
    body: true,
    async handle({ body, actor, idempotencyKey }, deps) {
      const problems: string[] = [];
      const o = fields(body, CREATE_FIELDS, problems);
      const input: NewKeyInput = changesOf(o, problems, false);
      if (o.owner !== undefined) {
        if (typeof o.owner !== 'string') problems.push(`body.owner: ${OWNER_RULE}`);
        else input.owner = o.owner;
      }
      if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY.test(idempotencyKey))
        problems.push('Idempotency-Key: 1 to 255 visible ASCII characters');
      // Collect the record parser's problems too, so one answer lists everything.
      if (problems.length > 0) {
        return invalid([...problems, ...asBody(deps.ops.check(input))]);
      }
      const made = await deps.ops.create(
        input,
        actor,
        idempotencyKey === undefined ? undefined : { key: idempotencyKey, body: JSON.stringify(body ?? null) },
      );
      if (!made.ok) return refusal(made);
      const { record, replayed } = made.value;
      return {
        status: 201,
        body: { ...(await view(record, deps)), apiSecret: record.secret },
        headers: {
          location: `/v1/keys/${encodeURIComponent(record.apiKey)}`,
          ...(replayed && { 'idempotent-replayed': 'true' }),
        },
      };
    },
  },
  {
    pattern: '/v1/keys/{apiKey}',
    method: 'GET',
    write: false,
    body: false,
    async handle({ apiKey, query }, deps) {
      const problems: string[] = [];
      onlyParams(query, [], problems);
      if (problems.length > 0) return invalid(problems);
      const r = await deps.ops.get(apiKey as string);
      return r.ok ? { status: 200, body: await view(r.value, deps) } : refusal(r);
    },
  },
  {
    pattern: '/v1/keys/{apiKey}',
    method: 'PATCH',
    write: true,
    body: true,
    async handle({ apiKey, body, actor }, deps) {
      const problems: string[] = [];
      const o = fields(body, PATCH_FIELDS, problems);
      const changes = changesOf(o, problems, true);
      if (problems.length === 0 && Object.keys(changes).length === 0)
        problems.push(`body: nothing to change (give any of ${PATCH_FIELDS.join(', ')})`);
      if (problems.length > 0) {
        const key = await deps.ops.get(apiKey as string);
        if (!key.ok) return refusal(key);
        return invalid([...problems, ...asBody(deps.ops.checkUpdate(key.value, changes))]);
      }
      const r = await deps.ops.update(apiKey as string, changes, actor);
      return r.ok ? { status: 200, body: await view(r.value, deps) } : refusal(r);
    },
  },
  {
    pattern: '/v1/keys/{apiKey}',
    method: 'DELETE',
    write: true,
    body: false,
    async handle({ apiKey, actor }, deps) {
      const r = await deps.ops.remove(apiKey as string, actor);
      return r.ok ? { status: 204 } : refusal(r);
    },
  },
  {
    pattern: '/v1/keys/{apiKey}/rotate',
    method: 'POST',
    write: true,
    body: true,
    async handle({ apiKey, body, actor }, deps) {
      const problems: string[] = [];
      const o = fields(body, ['graceSeconds', 'reason'], problems);
      const reason = text(o, 'reason', 500, problems);
      const grace = o.graceSeconds ?? 300;
      if (typeof grace !== 'number' || !Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS)
        problems.push(`body.graceSeconds: a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
      if (problems.length > 0) return invalid(problems);
      const r = await deps.ops.rotate(apiKey as string, (grace as number) * 1000, actor, reason);
      if (!r.ok) return refusal(r);
      return {
        status: 200,
        body: {
          ...(await view(r.value.record, deps)),
          apiSecret: r.value.secret,
          previousSecretValidUntil: r.value.previousSecretValidUntil,
        },
      };
    },
  },
  {
    pattern: '/v1/keys/{apiKey}/revoke',
    method: 'POST',
    write: true,
    body: true,
    async handle({ apiKey, body, actor }, deps) {
      const problems: string[] = [];
      const o = fields(body, ['reason'], problems);
      const reason = text(o, 'reason', 500, problems);
      if (problems.length > 0) return invalid(problems);
      const r = await deps.ops.revoke(apiKey as string, reason, actor);
      return r.ok ? { status: 200, body: await view(r.value, deps) } : refusal(r);
    },
  },
  {
    pattern: '/v1/keys/{apiKey}/usage',
    method: 'GET',
    write: false,
    body: false,
    async handle({ apiKey, query }, deps) {
      const problems: string[] = [];
      onlyParams(query, ['days'], problems);
      const days = parseUsageDays(query.get('days') ?? undefined);
      if (days === undefined) problems.push(`query.days: ${USAGE_DAYS_RULE}`);
      if (problems.length > 0 || days === undefined) return invalid(problems);
      const r = await deps.ops.usage(apiKey as string);
      if (!r.ok) return refusal(r);
      return { status: 200, body: usageReport(r.value.record, r.value.usage, days, deps.now()) };
    },
  },
];
