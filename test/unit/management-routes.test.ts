import { afterEach, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { ROUTES, type Answer, type Call, type RouteDeps } from '../../src/management/management-routes.js';
import { createMemoryStore, type MemoryStore } from '../../src/store/memory/memory-store.js';
import type { AuditEntry } from '../../src/store/store.js';
import { makeKey } from '../helpers/make-key.js';

/**
 * The management handlers as functions from a parsed call to an answer: the
 * memory store, a manual clock, no HTTP. What the HTTP layer adds (tokens,
 * body limits, JSON parsing, write-needs-Redis) is in test/e2e/management-api.test.ts.
 */
const T0 = Date.parse('2026-03-01T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

const ACTIVE = 'kg_active_0001';
const OTHER = 'kg_active_0002';
const REVOKED = 'kg_revoked_001';
const EXPIRED = 'kg_expired_001';

interface World {
  deps: RouteDeps;
  store: MemoryStore;
  audit: AuditEntry[];
  clock: ReturnType<typeof manualClock>;
}

let opened: MemoryStore[] = [];
afterEach(async () => {
  await Promise.all(opened.map((s) => s.close()));
  opened = [];
});

function world(): World {
  const clock = manualClock(T0);
  const keys: KeyRecord[] = [
    makeKey({ apiKey: ACTIVE, owner: 'acme', createdAt: iso(T0 - 1000), rateLimit: { rate: '10/s', burst: 10 } }),
    makeKey({ apiKey: OTHER, owner: 'globex', createdAt: iso(T0 - 1000) }),
    makeKey({ apiKey: REVOKED, owner: 'acme', state: 'revoked', revokedAt: iso(T0 - 500) }),
    makeKey({ apiKey: EXPIRED, expiresAt: iso(T0 - 1) }),
  ];
  const store = createMemoryStore({ keys }, { clock });
  opened.push(store);
  const audit: AuditEntry[] = [];
  const now = () => clock.nowMs();
  const ops = createKeyOperations({ store, now, audit: (e) => audit.push(e) });
  return { deps: { ops, store, now }, store, audit, clock };
}

function call(over: Partial<Omit<Call, 'query'>> & { query?: string } = {}): Call {
  return {
    apiKey: over.apiKey,
    query: new URLSearchParams(over.query ?? ''),
    body: over.body,
    actor: over.actor ?? 'settings-backend',
    idempotencyKey: over.idempotencyKey,
  };
}

function route(method: string, pattern: string) {
  const r = ROUTES.find((x) => x.method === method && x.pattern === pattern);
  if (!r) throw new Error(`no route ${method} ${pattern}`);
  return r;
}

const run = (w: World, method: string, pattern: string, c: Call) => route(method, pattern).handle(c, w.deps);

function ok(a: Answer): { status: number; body: Record<string, unknown>; headers: Record<string, string> } {
  if ('error' in a) throw new Error(`expected an answer, got ${a.error}: ${a.message ?? ''} ${a.problems?.join('; ')}`);
  return { status: a.status, body: (a.body ?? {}) as Record<string, unknown>, headers: { ...a.headers } };
}

interface Refused {
  name: string;
  method: string;
  pattern: string;
  call: Call;
  error: string;
  /** A problem or message text the answer must contain. */
  says?: string;
}

const ROOT = '/v1/keys';
const ONE = '/v1/keys/{apiKey}';

describe('management routes: the table', () => {
  it('has one handler per method and pattern, writes exactly the non-GET routes', () => {
    const seen = new Set(ROUTES.map((r) => `${r.method} ${r.pattern}`));
    expect(seen.size).toBe(ROUTES.length);
    for (const r of ROUTES) expect([r.pattern, r.write]).toEqual([r.pattern, r.method !== 'GET']);
  });
});

describe('management routes: refusals', () => {
  const cases: Refused[] = [
    {
      name: 'list: limit 0',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'limit=0' }),
      error: 'invalid_request',
      says: 'query.limit',
    },
    {
      name: 'list: limit too big',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'limit=501' }),
      error: 'invalid_request',
      says: 'query.limit',
    },
    {
      name: 'list: unknown parameter',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'colour=red' }),
      error: 'invalid_request',
      says: 'query.colour: unknown parameter',
    },
    {
      name: 'list: parameter twice',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'owner=a&owner=b' }),
      error: 'invalid_request',
      says: 'given more than once',
    },
    {
      name: 'list: bad state',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'state=paused' }),
      error: 'invalid_request',
      says: 'query.state',
    },
    {
      name: 'list: bad owner',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'owner=a%20b' }),
      error: 'invalid_request',
      says: 'query.owner',
    },
    {
      name: 'list: forged cursor',
      method: 'GET',
      pattern: ROOT,
      call: call({ query: 'cursor=a.b' }),
      error: 'invalid_request',
      says: 'query.cursor',
    },
    { name: 'show: unknown key', method: 'GET', pattern: ONE, call: call({ apiKey: 'kg_nobody' }), error: 'not_found' },
    {
      name: 'show: any parameter',
      method: 'GET',
      pattern: ONE,
      call: call({ apiKey: ACTIVE, query: 'x=1' }),
      error: 'invalid_request',
      says: 'allowed: none',
    },
    {
      name: 'usage: bad days',
      method: 'GET',
      pattern: `${ONE}/usage`,
      call: call({ apiKey: ACTIVE, query: 'days=0' }),
      error: 'invalid_request',
      says: 'query.days',
    },
    {
      name: 'usage: unknown key',
      method: 'GET',
      pattern: `${ONE}/usage`,
      call: call({ apiKey: 'kg_nobody' }),
      error: 'not_found',
    },
    {
      name: 'create: body not an object',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: [1] }),
      error: 'invalid_request',
      says: 'body: must be a JSON object',
    },
    {
      name: 'create: unknown field',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: { apiSecret: 'x' } }),
      error: 'invalid_request',
      says: 'body.apiSecret: unknown field',
    },
    {
      name: 'create: scopes not strings',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: { scopes: [1] } }),
      error: 'invalid_request',
      says: 'body.scopes: must be a list of strings',
    },
    {
      name: 'create: bad date',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: { expiresAt: 'soon' } }),
      error: 'invalid_request',
      says: 'body.expiresAt',
    },
    {
      name: 'create: null expiry',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: { expiresAt: null } }),
      error: 'invalid_request',
      says: 'body.expiresAt',
    },
    {
      name: 'create: record parser problem, named as body',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: { allowIps: ['not-an-ip'] } }),
      error: 'invalid_request',
      says: 'body.allowIps',
    },
    {
      name: 'create: bad Idempotency-Key',
      method: 'POST',
      pattern: ROOT,
      call: call({ body: {}, idempotencyKey: 'a b' }),
      error: 'invalid_request',
      says: 'Idempotency-Key',
    },
    {
      name: 'patch: nothing to change',
      method: 'PATCH',
      pattern: ONE,
      call: call({ apiKey: ACTIVE, body: {} }),
      error: 'invalid_request',
      says: 'nothing to change',
    },
    {
      name: 'patch: owner is fixed',
      method: 'PATCH',
      pattern: ONE,
      call: call({ apiKey: ACTIVE, body: { owner: 'x' } }),
      error: 'invalid_request',
      says: 'body.owner: unknown field',
    },
    {
      name: 'patch: unknown key',
      method: 'PATCH',
      pattern: ONE,
      call: call({ apiKey: 'kg_nobody', body: { label: 'x' } }),
      error: 'not_found',
    },
    {
      name: 'patch: unknown key, bad body',
      method: 'PATCH',
      pattern: ONE,
      call: call({ apiKey: 'kg_nobody', body: {} }),
      error: 'not_found',
    },
    {
      name: 'patch: revoked key',
      method: 'PATCH',
      pattern: ONE,
      call: call({ apiKey: REVOKED, body: { label: 'x' } }),
      error: 'conflict',
      says: 'revoked',
    },
    {
      name: 'patch: label too long',
      method: 'PATCH',
      pattern: ONE,
      call: call({ apiKey: ACTIVE, body: { label: 'x'.repeat(201) } }),
      error: 'invalid_request',
      says: 'body.label',
    },
    {
      name: 'rotate: negative grace',
      method: 'POST',
      pattern: `${ONE}/rotate`,
      call: call({ apiKey: ACTIVE, body: { graceSeconds: -1 } }),
      error: 'invalid_request',
      says: 'body.graceSeconds',
    },
    {
      name: 'rotate: grace over 30 days',
      method: 'POST',
      pattern: `${ONE}/rotate`,
      call: call({ apiKey: ACTIVE, body: { graceSeconds: 30 * 86_400 + 1 } }),
      error: 'invalid_request',
      says: 'body.graceSeconds',
    },
    {
      name: 'rotate: revoked key',
      method: 'POST',
      pattern: `${ONE}/rotate`,
      call: call({ apiKey: REVOKED }),
      error: 'conflict',
      says: 'only an active key',
    },
    {
      name: 'rotate: expired key',
      method: 'POST',
      pattern: `${ONE}/rotate`,
      call: call({ apiKey: EXPIRED }),
      error: 'conflict',
      says: 'only an active key',
    },
    {
      name: 'rotate: unknown key',
      method: 'POST',
      pattern: `${ONE}/rotate`,
      call: call({ apiKey: 'kg_nobody' }),
      error: 'not_found',
    },
    {
      name: 'revoke: already revoked',
      method: 'POST',
      pattern: `${ONE}/revoke`,
      call: call({ apiKey: REVOKED }),
      error: 'conflict',
      says: 'already revoked',
    },
    {
      name: 'revoke: empty reason',
      method: 'POST',
      pattern: `${ONE}/revoke`,
      call: call({ apiKey: ACTIVE, body: { reason: '' } }),
      error: 'invalid_request',
      says: 'body.reason',
    },
    {
      name: 'delete: unknown key',
      method: 'DELETE',
      pattern: ONE,
      call: call({ apiKey: 'kg_nobody' }),
      error: 'not_found',
    },
  ];
  it.each(cases)('$name → $error, nothing written', async (c) => {
    const w = world();
    const before = await w.store.listKeys({ limit: 500 });
    const a = await run(w, c.method, c.pattern, c.call);
    expect('error' in a && a.error).toBe(c.error);
    if (c.says && 'error' in a) expect([a.message ?? '', ...(a.problems ?? [])].join('\n')).toContain(c.says);
    expect(await w.store.listKeys({ limit: 500 })).toEqual(before);
    expect(w.audit).toEqual([]);
  });
});

describe('management routes: answers', () => {
  it('list: every key in apiKey order, never a secret, pages by cursor', async () => {
    const w = world();
    const all = ok(await run(w, 'GET', ROOT, call()));
    const keys = all.body.keys as Record<string, unknown>[];
    expect(keys.map((k) => k.apiKey)).toEqual([ACTIVE, OTHER, EXPIRED, REVOKED]);
    expect(all.body.nextCursor).toBeNull();
    for (const k of keys) expect(Object.keys(k)).not.toContain('secret');
    const first = ok(await run(w, 'GET', ROOT, call({ query: 'limit=3' })));
    expect((first.body.keys as unknown[]).length).toBe(3);
    const rest = ok(await run(w, 'GET', ROOT, call({ query: `limit=3&cursor=${first.body.nextCursor as string}` })));
    expect((rest.body.keys as Record<string, unknown>[]).map((k) => k.apiKey)).toEqual([REVOKED]);
    expect(rest.body.nextCursor).toBeNull();
  });

  it.each([
    { query: 'owner=acme', keys: [ACTIVE, REVOKED] },
    { query: 'state=active', keys: [ACTIVE, OTHER] },
    { query: 'state=expired', keys: [EXPIRED] },
    { query: 'owner=acme&state=revoked', keys: [REVOKED] },
    { query: 'owner=initech', keys: [] },
  ])('list: filter $query', async ({ query, keys }) => {
    const a = ok(await run(world(), 'GET', ROOT, call({ query })));
    expect((a.body.keys as Record<string, unknown>[]).map((k) => k.apiKey)).toEqual(keys);
  });

  it.each([
    { apiKey: ACTIVE, status: 'active' },
    { apiKey: REVOKED, status: 'revoked' },
    { apiKey: EXPIRED, status: 'expired' },
  ])('show: $apiKey is $status, no secret', async ({ apiKey, status }) => {
    const a = ok(await run(world(), 'GET', ONE, call({ apiKey })));
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ apiKey, status, lastUsedAt: null });
    expect(JSON.stringify(a.body)).not.toContain('secret-for-');
  });

  it('usage: the requested days, counted from the store', async () => {
    const w = world();
    await w.store.admit(ACTIVE, 'nonce-1', 60_000, undefined);
    await w.store.admit(ACTIVE, 'nonce-2', 60_000, undefined);
    const a = ok(await run(w, 'GET', `${ONE}/usage`, call({ apiKey: ACTIVE, query: 'days=3' })));
    expect(a.body).toMatchObject({ apiKey: ACTIVE, days: 3, total: 2, lastUsedAt: iso(T0) });
    expect((a.body.perDay as unknown[]).length).toBe(3);
  });

  it('create: 201, the secret once, Location, an audit entry, the record stored', async () => {
    const w = world();
    const a = ok(await run(w, 'POST', ROOT, call({ body: { owner: 'acme', scopes: ['accounts:read'], label: 'ci' } })));
    expect(a.status).toBe(201);
    const apiKey = a.body.apiKey as string;
    expect(a.headers).toEqual({ location: `/v1/keys/${apiKey}` });
    expect(a.body).toMatchObject({
      owner: 'acme',
      scopes: ['accounts:read'],
      label: 'ci',
      status: 'active',
      createdAt: iso(T0),
    });
    expect(typeof a.body.apiSecret).toBe('string');
    expect((await w.store.getKey(apiKey))?.secret).toBe(a.body.apiSecret);
    expect(w.audit).toEqual([
      { at: iso(T0), actor: 'settings-backend', action: 'create', apiKey, id: a.body.id, owner: 'acme' },
    ]);
  });

  it('create: the same Idempotency-Key replays the first key; another body with it is a conflict', async () => {
    const w = world();
    const body = { label: 'retry' };
    const first = ok(await run(w, 'POST', ROOT, call({ body, idempotencyKey: 'req-1' })));
    const again = ok(await run(w, 'POST', ROOT, call({ body, idempotencyKey: 'req-1' })));
    expect(again.body.apiKey).toBe(first.body.apiKey);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const other = await run(w, 'POST', ROOT, call({ body: { label: 'other' }, idempotencyKey: 'req-1' }));
    expect('error' in other && other.error).toBe('conflict');
    // Another actor's retry key is its own: a new key.
    const theirs = ok(await run(w, 'POST', ROOT, call({ body, idempotencyKey: 'req-1', actor: 'console' })));
    expect(theirs.body.apiKey).not.toBe(first.body.apiKey);
    expect(w.audit.map((e) => e.action)).toEqual(['create', 'create-replay', 'create']);
    expect(w.audit[1]).toEqual({
      at: iso(T0),
      actor: 'settings-backend',
      action: 'create-replay',
      apiKey: first.body.apiKey,
      id: first.body.id,
    });
  });

  // A replay returns the first answer only while it is still true: never a secret the first create did not return.
  it.each([
    { change: 'rotate', path: `${ONE}/rotate`, body: { graceSeconds: 60 } },
    { change: 'revoke', path: `${ONE}/revoke`, body: { reason: 'leaked' } },
    { change: 'label', path: ONE, method: 'PATCH', body: { label: 'renamed' } },
    { change: 'delete', path: ONE, method: 'DELETE', body: undefined },
  ])('create: a replay after a $change is 409 naming the key, no secret, nothing written', async (c) => {
    const w = world();
    const body = { owner: 'acme', label: 'retry' };
    const first = ok(await run(w, 'POST', ROOT, call({ body, idempotencyKey: 'req-2' })));
    const apiKey = first.body.apiKey as string;
    ok(await run(w, c.method ?? 'POST', c.path, call({ apiKey, body: c.body })));
    const keysBefore = (await w.store.listKeys({ limit: 500 })).records.length;
    const again = await run(w, 'POST', ROOT, call({ body, idempotencyKey: 'req-2' }));
    if (!('error' in again)) throw new Error(`expected a refusal, got ${again.status}`);
    expect(again.error).toBe('conflict');
    expect(again.message).toContain(apiKey);
    expect(again.message).toContain(first.body.id as string);
    expect(JSON.stringify(again)).not.toContain(first.body.apiSecret as string);
    expect((await w.store.listKeys({ limit: 500 })).records.length).toBe(keysBefore);
    expect(w.audit.map((e) => e.action)).not.toContain('create-replay');
  });

  // A label or reason is printed in an operator's terminal (keys list): nothing that rewrites a line gets in.
  it.each(
    [
      '\u001b[2J',
      'row\r\nkg_forged  active',
      '\u0007',
      '\u009b31m',
      '\u202eevil',
      '\u2066x\u2069',
      'tab\there',
      '\u007f',
    ].flatMap((bad) =>
      [
        {
          name: 'create label',
          method: 'POST',
          pattern: ROOT,
          apiKey: undefined,
          body: { label: bad },
          field: 'body.label',
        },
        {
          name: 'patch label',
          method: 'PATCH',
          pattern: ONE,
          apiKey: ACTIVE,
          body: { label: bad },
          field: 'body.label',
        },
        {
          name: 'revoke reason',
          method: 'POST',
          pattern: `${ONE}/revoke`,
          apiKey: ACTIVE,
          body: { reason: bad },
          field: 'body.reason',
        },
        {
          name: 'rotate reason',
          method: 'POST',
          pattern: `${ONE}/rotate`,
          apiKey: ACTIVE,
          body: { reason: bad },
          field: 'body.reason',
        },
      ].map((c) => ({ ...c, bad: JSON.stringify(bad) })),
    ),
  )('$name $bad: 400 naming the field, nothing written', async (c) => {
    const w = world();
    const before = await w.store.listKeys({ limit: 500 });
    const a = await run(w, c.method, c.pattern, call({ apiKey: c.apiKey, body: c.body }));
    if (!('error' in a)) throw new Error(`expected a refusal, got ${a.status}`);
    expect(a.error).toBe('invalid_request');
    expect(a.problems).toEqual([expect.stringMatching(new RegExp(`^${c.field}: must not contain control characters`))]);
    expect(await w.store.listKeys({ limit: 500 })).toEqual(before);
    expect(w.audit).toEqual([]);
  });

  it.each([
    { name: 'label', body: { label: 'renamed' }, expect: { label: 'renamed' } },
    { name: 'scopes', body: { scopes: ['orders:write'] }, expect: { scopes: ['orders:write'] } },
    {
      name: 'expiry set',
      body: { expiresAt: '2027-01-01T00:00:00Z' },
      expect: { expiresAt: '2027-01-01T00:00:00.000Z' },
    },
    { name: 'limit removed', body: { rateLimit: null }, absent: 'rateLimit' },
  ])('patch: $name', async (c) => {
    const w = world();
    const a = ok(await run(w, 'PATCH', ONE, call({ apiKey: ACTIVE, body: c.body })));
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ apiKey: ACTIVE, updatedAt: iso(T0), ...c.expect });
    if (c.absent) expect(a.body).not.toHaveProperty(c.absent);
    expect(await w.store.getKey(ACTIVE)).toMatchObject(c.expect ?? {});
    expect(w.audit.map((e) => [e.action, e.changes])).toEqual([['update', Object.keys(c.body)]]);
  });

  it('rotate: a new secret, the old one kept for the grace read from one clock reading', async () => {
    const w = world();
    const a = ok(await run(w, 'POST', `${ONE}/rotate`, call({ apiKey: ACTIVE, body: { graceSeconds: 60 } })));
    expect(a.body.previousSecretValidUntil).toBe(iso(T0 + 60_000));
    expect(a.body.previousSecrets).toEqual([{ validUntil: iso(T0 + 60_000), alg: 'HS256' }]);
    const stored = await w.store.getKey(ACTIVE);
    expect(stored?.secret).toBe(a.body.apiSecret);
    expect(stored?.previousSecrets?.[0]?.secret).toBe(`secret-for-${ACTIVE}-0123456789`);
    expect(w.audit.map((e) => [e.action, e.detail])).toEqual([['rotate', 'grace=60000ms']]);
  });

  it('rotate: no body means the default 300 s grace', async () => {
    const a = ok(await run(world(), 'POST', `${ONE}/rotate`, call({ apiKey: ACTIVE })));
    expect(a.body.previousSecretValidUntil).toBe(iso(T0 + 300_000));
  });

  it('revoke: revoked now, with the reason, audited', async () => {
    const w = world();
    const a = ok(await run(w, 'POST', `${ONE}/revoke`, call({ apiKey: ACTIVE, body: { reason: 'leaked' } })));
    expect(a.body).toMatchObject({ status: 'revoked', revokedAt: iso(T0), revokeReason: 'leaked' });
    expect((await w.store.getKey(ACTIVE))?.state).toBe('revoked');
    expect(w.audit.map((e) => [e.action, e.reason])).toEqual([['revoke', 'leaked']]);
  });

  it('delete: 204, gone from the store, audited', async () => {
    const w = world();
    const a = ok(await run(w, 'DELETE', ONE, call({ apiKey: REVOKED })));
    expect(a).toEqual({ status: 204, body: {}, headers: {} });
    expect(await w.store.getKey(REVOKED)).toBeNull();
    expect(w.audit.map((e) => [e.action, e.apiKey])).toEqual([['delete', REVOKED]]);
  });
});
