import { keyStatus, publicView, type KeyRecord } from '../store/key-record.js';
import { newKey, parseDuration, revokeKey, rotateKey, updateKey, type KeyChanges } from '../store/key-lifecycle.js';
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
  return changes;
}

export async function runKeyAction(action: string, apiKey: string | undefined, v: KeyActionValues, ctx: KeyActionContext): Promise<number> {
  const { store, out, err } = ctx;
  const print = (value: unknown) => out.write(`${JSON.stringify(value, null, 2)}\n`);
  const fail = (message: string, code = 2) => {
    err.write(`keygate keys ${action}: ${message}\n`);
    return code;
  };
  const save = async (record: KeyRecord, what: string, detail?: string) => {
    await store.putKey(record);
    const entry: AuditEntry = { at: new Date(ctx.now()).toISOString(), actor: ctx.actor, action: what, apiKey: record.apiKey, id: record.id, ...(detail && { detail }) };
    ctx.audit(entry);
    await store.appendAudit(entry);
  };
  const load = async (): Promise<KeyRecord | number> => {
    if (!apiKey) return fail('an <apiKey> argument is required');
    return (await store.getKey(apiKey)) ?? fail(`no key ${JSON.stringify(apiKey)}`, 1);
  };

  switch (action) {
    case 'create': {
      const changes = changesFrom(v, ctx.now());
      if (typeof changes === 'string') return fail(changes);
      const { record, errors } = newKey(changes, ctx.now());
      if (!record) return fail(`\n  - ${errors.join('\n  - ')}`);
      await save(record, 'create');
      const shown = { apiKey: record.apiKey, apiSecret: record.secret, id: record.id, scopes: record.scopes, allowIps: record.allowIps, ...(record.label && { label: record.label }), ...(record.expiresAt && { expiresAt: record.expiresAt }) };
      if (v.json) print(shown);
      else out.write(`Created key ${record.id}\n  apiKey:    ${record.apiKey}\n  apiSecret: ${record.secret}\n  scopes:    ${record.scopes.join(',') || '(none)'}\n  allowIps:  ${record.allowIps.join(',') || '(any)'}\n  expires:   ${record.expiresAt ?? 'never'}\nThe secret is shown only now; store it safely.\n`);
      return 0;
    }
    case 'list': {
      if (v.state && !['active', 'revoked', 'expired'].includes(v.state)) return fail('--state must be active, revoked or expired');
      const now = ctx.now();
      const rows = (await store.listKeys()).map((r) => publicView(r, now)).filter((r) => !v.state || r.status === v.state);
      if (v.json) print(rows);
      else out.write(table(rows.map((r) => [r.apiKey, r.id, r.status, r.scopes.join(',') || '-', r.allowIps.join(',') || '-', r.expiresAt ?? '-', r.revokedAt ? `${r.revokedAt}${r.revokeReason ? ` (${r.revokeReason})` : ''}` : '-', r.label ?? ''])));
      return 0;
    }
    case 'show': {
      const r = await load();
      if (typeof r === 'number') return r;
      print(publicView(r, ctx.now()));
      return 0;
    }
    case 'update': {
      const r = await load();
      if (typeof r === 'number') return r;
      const changes = changesFrom(v, ctx.now());
      if (typeof changes === 'string') return fail(changes);
      if (Object.keys(changes).length === 0) return fail('nothing to change (use --scopes, --allow-ip, --label, --expires-at, --ttl or --no-expiry)');
      const { record, errors } = updateKey(r, changes, ctx.now());
      if (!record) return fail(`\n  - ${errors.join('\n  - ')}`);
      await save(record, 'update', Object.keys(changes).join(','));
      print(publicView(record, ctx.now()));
      return 0;
    }
    case 'rotate': {
      const r = await load();
      if (typeof r === 'number') return r;
      if (keyStatus(r, ctx.now()) !== 'active') return fail('only an active key can be rotated', 1);
      const graceMs = parseDuration(v.grace ?? '300s');
      if (graceMs === undefined) return fail(`--grace: expected a duration like 300s or 10m, got ${v.grace}`);
      const { record, secret } = rotateKey(r, graceMs, ctx.now());
      await save(record, 'rotate', `grace=${graceMs}ms`);
      const until = new Date(ctx.now() + graceMs).toISOString();
      if (v.json) print({ apiKey: record.apiKey, apiSecret: secret, id: record.id, previousSecretValidUntil: until });
      else out.write(`Rotated ${record.apiKey} (${record.id})\n  new apiSecret: ${secret}\n  old secret accepted until ${until}\nThe new secret is shown only now.\n`);
      return 0;
    }
    case 'revoke': {
      const r = await load();
      if (typeof r === 'number') return r;
      await save(revokeKey(r, v.reason, ctx.now()), 'revoke', v.reason);
      out.write(`revoked ${r.apiKey} (${r.id})\n`);
      return 0;
    }
    case 'delete': {
      const r = await load();
      if (typeof r === 'number') return r;
      await store.deleteKey(r.apiKey);
      const entry: AuditEntry = { at: new Date(ctx.now()).toISOString(), actor: ctx.actor, action: 'delete', apiKey: r.apiKey, id: r.id };
      ctx.audit(entry);
      await store.appendAudit(entry);
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

function table(rows: string[][]): string {
  const head = ['API KEY', 'ID', 'STATUS', 'SCOPES', 'ALLOW IPS', 'EXPIRES', 'REVOKED', 'LABEL'];
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return `${all.map((r) => r.map((c, i) => c.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n')}\n`;
}
