// Tested in test/unit/management-routes.test.ts, test/e2e/management-api.test.ts.
import type { NewKeyInput } from '../keys/key-changes.js';
import { OWNER_RULE } from '../keys/key-record.js';
import { asBody, invalid, keyView, refusal, type Handler } from './management-answer.js';
import { changesOf, credentialOf, fields } from './request-fields.js';

const CREATE_FIELDS = [
  'owner',
  'scopes',
  'allowIps',
  'label',
  'expiresAt',
  'rateLimit',
  'credits',
  'binding',
  'home',
  'alg',
  'publicKey',
] as const;
const PATCH_FIELDS = ['scopes', 'allowIps', 'label', 'expiresAt', 'rateLimit', 'credits', 'binding', 'home'] as const;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** POST /v1/keys: a new key, its secret shown this once (or, with alg and publicKey, a client public key); a retry with the same Idempotency-Key replays it. */
const create: Handler = async ({ body, actor, idempotencyKey }, deps) => {
  const problems: string[] = [];
  const o = fields(body, CREATE_FIELDS, problems);
  const input: NewKeyInput = { ...changesOf(o, problems, false), ...credentialOf(o, problems) };
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
    // An EdDSA/ES256 key has no secret: the answer carries none.
    body: { ...(await keyView(record, deps)), ...(record.secret !== undefined && { apiSecret: record.secret }) },
    headers: {
      location: `/v1/keys/${encodeURIComponent(record.apiKey)}`,
      ...(replayed && { 'idempotent-replayed': 'true' }),
    },
  };
};

/** PATCH /v1/keys/{apiKey}: changes scopes, allowIps, label, expiry, limit or binding; null removes an expiry or a limit. */
const patch: Handler = async ({ apiKey, body, actor }, deps) => {
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
  if (!r.ok) return refusal(r);
  // A home move whose credits balance was not carried says so (the key is moved all the same).
  const view = await keyView(r.value, deps);
  return { status: 200, body: r.warnings ? { ...view, warnings: r.warnings } : view };
};

/** POST /v1/keys/{apiKey}/credits: `{"add": n}`, one atomic top-up; answers the balance after it. */
const addCredits: Handler = async ({ apiKey, body, actor }, deps) => {
  const problems: string[] = [];
  const o = fields(body, ['add'], problems);
  if (problems.length > 0) return invalid(problems);
  const r = await deps.ops.addCredits(apiKey as string, o.add, actor);
  return r.ok ? { status: 200, body: r.value } : refusal(r);
};

/** The handlers that make or change a key's settings (write tokens, Redis store only). */
export const keyWriteHandlers = { create, patch, addCredits } as const;
