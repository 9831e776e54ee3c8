// Tested in test/unit/management-routes.test.ts, test/e2e/management-api.test.ts.
import { invalid, keyView, refusal, type Handler } from './management-answer.js';
import { credentialOf, fields, text } from './request-fields.js';

const MAX_GRACE_SECONDS = 30 * 86_400;

/** POST /v1/keys/{apiKey}/rotate: a new secret, or (alg, publicKey) a new public key; the old one stays valid for graceSeconds (default 300). */
const rotate: Handler = async ({ apiKey, body, actor }, deps) => {
  const problems: string[] = [];
  const o = fields(body, ['graceSeconds', 'reason', 'alg', 'publicKey'], problems);
  const reason = text(o, 'reason', 500, problems);
  const to = credentialOf(o, problems);
  const grace = o.graceSeconds ?? 300;
  if (typeof grace !== 'number' || !Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS)
    problems.push(`body.graceSeconds: a whole number of seconds from 0 to ${MAX_GRACE_SECONDS}`);
  if (problems.length > 0) return invalid(problems);
  const r = await deps.ops.rotate(apiKey as string, (grace as number) * 1000, actor, reason, to);
  if (!r.ok) return refusal(r);
  return {
    status: 200,
    body: {
      ...(await keyView(r.value.record, deps)),
      ...(r.value.secret !== undefined && { apiSecret: r.value.secret }),
      previousSecretValidUntil: r.value.previousSecretValidUntil,
    },
  };
};

/** POST /v1/keys/{apiKey}/revoke: the key stops at once, on every instance; a revoked key stays listed. */
const revoke: Handler = async ({ apiKey, body, actor }, deps) => {
  const problems: string[] = [];
  const o = fields(body, ['reason'], problems);
  const reason = text(o, 'reason', 500, problems);
  if (problems.length > 0) return invalid(problems);
  const r = await deps.ops.revoke(apiKey as string, reason, actor);
  return r.ok ? { status: 200, body: await keyView(r.value, deps) } : refusal(r);
};

/** DELETE /v1/keys/{apiKey}: the record is gone (the audit stream keeps that it was). */
const remove: Handler = async ({ apiKey, actor }, deps) => {
  const r = await deps.ops.remove(apiKey as string, actor);
  return r.ok ? { status: 204 } : refusal(r);
};

/** The handlers that move a key through its life: rotate, revoke, delete (write tokens, Redis store only). */
export const keyLifecycleHandlers = { rotate, revoke, remove } as const;
