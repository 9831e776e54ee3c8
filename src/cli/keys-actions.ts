import { publicView, type KeyRecord, type KeyStatus } from '../store/key-record.js';
import { dailyRows, USAGE_DAYS } from '../store/key-usage.js';
import { describeRateLimit } from '../config/rate-limit-spec.js';
import { createKeyOperations, parseDuration, type KeyChanges, type Refusal } from '../store/key-lifecycle.js';
import type { AuditEntry, Store } from '../store/types.js';
import { exportKeys, importKeys, reencryptKeys } from './keys-transfer.js';

export interface KeyActionContext {
  store: Store;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  now: () => number;
  actor: string;
  audit: (entry: AuditEntry) => void;
  /** True when secrets are sealed at rest. */
  encrypted: boolean;
}

export type KeyActionValues = {
  scopes?: string;
  'allow-ip'?: string;
  label?: string;
  reason?: string;
  state?: string;
  'expires-at'?: string;
  ttl?: string;
  'no-expiry'?: boolean;
  grace?: string;
  'with-secrets'?: boolean;
  out?: string;
  replace?: boolean;
  json?: boolean;
  'rate-limit'?: string;
  burst?: string;
  sort?: string;
  days?: string;
  owner?: string;
};

const list = (v: string | undefined) => (v === undefined ? undefined : v.split(',').map((s) => s.trim()).filter((s) => s.length > 0));

/** Turns flags into KeyChanges, or an error message. */
function changesFrom(v: KeyActionValues, nowMs: number): KeyChanges | string {
  const changes: KeyChanges = {};
  const scopes = list(v.scopes);
  const allowIps = list(v['allow-ip']);
  if (scopes) changes.scopes = scopes;
  if (allowIps) changes.allowIps = allowIps;
  if (v.label !== undefined) changes.label = v.label;
  const given = [v['expires-at'] !== undefined, v.ttl !== undefined, v['no-expiry'] === true].filter(Boolean).length;
  if (given > 1) return 'use only one of --expires-at, --ttl, --no-expiry';
  if (v['expires-at'] !== undefined) {
    const t = Date.parse(v['expires-at']);
    if (Number.isNaN(t)) return `--expires-at: not a date: ${v['expires-at']}`;
    changes.expiresAt = new Date(t).toISOString();
  }
  if (v.ttl !== undefined) {
    const ms = parseDuration(v.ttl);
    if (ms === undefined || ms === 0) return `--ttl: expected a duration like 30d, 12h, 90m, got ${v.ttl}`;
    changes.expiresAt = new Date(nowMs + ms).toISOString();
  }
  if (v['no-expiry']) changes.expiresAt = null;
  let burst: number | undefined;
  if (v.burst !== undefined) {
    if (!/^\d{1,7}$/.test(v.burst) || Number(v.burst) < 1) return `--burst: expected a whole number of requests, got ${v.burst}`;
    burst = Number(v.burst);
  }
  if (v['rate-limit'] === 'none') {
    if (burst !== undefined) return '--burst cannot go with --rate-limit none';
    changes.rateLimit = null;
  } else if (v['rate-limit'] !== undefined) {
    changes.rateLimit = { rate: v['rate-limit'], ...(burst !== undefined && { burst }) };
  } else if (burst !== undefined) {
    changes.burst = burst;
  }
  return changes;
}

export async function runKeyAction(action: string, apiKey: string | undefined, v: KeyActionValues, ctx: KeyActionContext): Promise<number> {
  const { store, out, err } = ctx;
  const print = (value: unknown) => out.write(`${JSON.stringify(value, null, 2)}\n`);
  const fail = (message: string, code = 2) => {
    err.write(`keygate keys ${action}: ${message}\n`);
    return code;
  };
  // The same operations the management API calls: one validation, one audit, one publish.
  const ops = createKeyOperations({ store, now: ctx.now, audit: ctx.audit });
  const save = (record: KeyRecord, what: string, detail?: string) => ops.save(record, what, ctx.actor, detail);
  const refused = (r: Refusal) =>
    r.refused === 'not_found' ? fail(`no key ${JSON.stringify(apiKey)}`, 1) : r.refused === 'invalid' ? fail(`\n  - ${r.problems.join('\n  - ')}`) : fail(r.message, 1);
  const load = async (): Promise<KeyRecord | number> => {
    if (!apiKey) return fail('an <apiKey> argument is required');
    const r = await ops.get(apiKey);
    return r.ok ? r.value : refused(r);
  };

  switch (action) {
    case 'create': {
      const changes = changesFrom(v, ctx.now());
      if (typeof changes === 'string') return fail(changes);
      if (changes.burst !== undefined) return fail('--burst needs --rate-limit');
      const made = await ops.create({ ...changes, ...(v.owner !== undefined && { owner: v.owner }) }, ctx.actor);
      if (!made.ok) return refused(made);
      const { record } = made.value;
      const shown = { apiKey: record.apiKey, apiSecret: record.secret, id: record.id, ...(record.owner && { owner: record.owner }), scopes: record.scopes, allowIps: record.allowIps, ...(record.label && { label: record.label }), ...(record.expiresAt && { expiresAt: record.expiresAt }), ...(record.rateLimit && { rateLimit: record.rateLimit }) };
      if (v.json) print(shown);
      else out.write(`Created key ${record.id}\n  apiKey:    ${record.apiKey}\n  apiSecret: ${record.secret}\n${record.owner ? `  owner:     ${record.owner}\n` : ''}  scopes:    ${record.scopes.join(',') || '(none)'}\n  allowIps:  ${record.allowIps.join(',') || '(any)'}\n  expires:   ${record.expiresAt ?? 'never'}\n  rate limit: ${record.rateLimit ? describeRateLimit(record.rateLimit) : 'none (the policy defaultRateLimit applies, if any)'}\nThe secret is shown only now; store it safely.\n`);
      return 0;
    }
    case 'list': {
      if (v.state && !['active', 'revoked', 'expired'].includes(v.state)) return fail('--state must be active, revoked or expired');
      if (v.sort !== undefined && v.sort !== 'last-used') return fail('--sort: only "last-used" (least recently used first, never used at the top)');
      const now = ctx.now();
      const keys = await ops.list({ ...(v.owner !== undefined && { owner: v.owner }), ...(v.state && { state: v.state as KeyStatus }) });
      const lastUsed = await Promise.all(keys.map(async (r) => (await store.getUsage(r.apiKey)).lastUsedAtMs));
      const rows = keys.map((r, i) => ({ ...publicView(r, now), lastUsedAt: isoOrNull(lastUsed[i]) }));
      if (v.sort === 'last-used') rows.sort((x, y) => (x.lastUsedAt ?? '').localeCompare(y.lastUsedAt ?? ''));
      if (v.json) print(rows);
      else out.write(table(rows.map((r) => [r.apiKey, r.id, r.status, r.scopes.join(',') || '-', r.allowIps.join(',') || '-', describeRateLimit(r.rateLimit).replace('none', '-'), r.lastUsedAt ?? 'never', r.expiresAt ?? '-', r.revokedAt ? `${r.revokedAt}${r.revokeReason ? ` (${r.revokeReason})` : ''}` : '-', r.owner ?? '-', r.label ?? ''])));
      return 0;
    }
    case 'show': {
      const r = await load();
      if (typeof r === 'number') return r;
      print({ ...publicView(r, ctx.now()), lastUsedAt: isoOrNull((await store.getUsage(r.apiKey)).lastUsedAtMs) });
      return 0;
    }
    case 'usage': {
      const r = await load();
      if (typeof r === 'number') return r;
      const days = v.days === undefined ? 30 : /^\d{1,2}$/.test(v.days) ? Number(v.days) : 0;
      if (days < 1 || days > USAGE_DAYS) return fail(`--days: a whole number from 1 to ${USAGE_DAYS} (per-day counts are kept ${USAGE_DAYS} days)`);
      const usage = await store.getUsage(r.apiKey);
      const perDay = dailyRows(usage, days, ctx.now());
      const total = perDay.reduce((sum, d) => sum + d.requests, 0);
      const lastUsedAt = isoOrNull(usage.lastUsedAtMs);
      if (v.json) print({ apiKey: r.apiKey, id: r.id, lastUsedAt, days, total, perDay });
      else out.write(`${r.apiKey} (${r.id})\n  last used: ${lastUsedAt ?? 'never'}\n  requests, last ${days} days (UTC): ${total}\n${perDay.map((d) => `  ${d.day}  ${String(d.requests).padStart(9)}`).join('\n')}\n`);
      return 0;
    }
    case 'update': {
      const r = await load();
      if (typeof r === 'number') return r;
      const changes = changesFrom(v, ctx.now());
      if (typeof changes === 'string') return fail(changes);
      if (Object.keys(changes).length === 0) return fail('nothing to change (use --scopes, --allow-ip, --label, --expires-at, --ttl, --no-expiry, --rate-limit or --burst)');
      const updated = await ops.update(r.apiKey, changes, ctx.actor);
      if (!updated.ok) return refused(updated);
      print(publicView(updated.value, ctx.now()));
      return 0;
    }
    case 'rotate': {
      const r = await load();
      if (typeof r === 'number') return r;
      const graceMs = parseDuration(v.grace ?? '300s');
      if (graceMs === undefined) return fail(`--grace: expected a duration like 300s or 10m, got ${v.grace}`);
      const rotated = await ops.rotate(r.apiKey, graceMs, ctx.actor);
      if (!rotated.ok) return refused(rotated);
      const { record, secret, previousSecretValidUntil: until } = rotated.value;
      if (v.json) print({ apiKey: record.apiKey, apiSecret: secret, id: record.id, previousSecretValidUntil: until });
      else out.write(`Rotated ${record.apiKey} (${record.id})\n  new apiSecret: ${secret}\n  old secret accepted until ${until}\nThe new secret is shown only now.\n`);
      return 0;
    }
    case 'revoke': {
      const r = await load();
      if (typeof r === 'number') return r;
      const revoked = await ops.revoke(r.apiKey, v.reason, ctx.actor);
      if (!revoked.ok) return refused(revoked);
      out.write(`revoked ${r.apiKey} (${r.id})\n`);
      return 0;
    }
    case 'delete': {
      const r = await load();
      if (typeof r === 'number') return r;
      const removed = await ops.remove(r.apiKey, ctx.actor);
      if (!removed.ok) return refused(removed);
      out.write(`deleted ${r.apiKey} (${r.id})\n`);
      return 0;
    }
    case 'export':
      return exportKeys(v, ctx);
    case 'import':
      if (!apiKey) return fail('a <file> argument is required');
      return importKeys(apiKey, v, ctx, save);
    case 'reencrypt':
      return reencryptKeys(ctx, save);
    default:
      return fail(`unknown action ${JSON.stringify(action)}; see keygate keys --help`);
  }
}

const isoOrNull = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

function table(rows: string[][]): string {
  const head = ['API KEY', 'ID', 'STATUS', 'SCOPES', 'ALLOW IPS', 'RATE LIMIT', 'LAST USED', 'EXPIRES', 'REVOKED', 'OWNER', 'LABEL'];
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return `${all.map((r) => r.map((c, i) => c.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n')}\n`;
}
