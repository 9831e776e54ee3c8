import { publicView, type KeyRecord, type KeyStatus } from '../keys/key-record.js';
import { lastUsedAt, parseUsageDays, usageReport, USAGE_DAYS, USAGE_DAYS_RULE } from '../keys/key-usage.js';
import { describeRateLimit } from '../policy/rate-limit-spec.js';
import { parseDuration, type KeyChanges } from '../keys/key-changes.js';
import { UsageError } from './cli-errors.js';
import { flag, str, type OptionSpec, type Parsed } from './command-line.js';
import { JSON_OPTION, type KeyAction, type KeyContext } from './key-context.js';
import { exportAction, importAction, reencryptAction } from './keys-transfer.js';

const opt = (name: string, value: string | undefined, help: string): OptionSpec =>
  value === undefined ? { name, type: 'boolean', help } : { name, type: 'string', value, help };

const OWNER = opt(
  'owner',
  'account-id',
  "the service's own account id the key belongs to (set at creation, never changed)",
);
const SCOPES = opt('scopes', 'a,b', 'comma-separated scopes the key grants');
const ALLOW_IP = opt('allow-ip', 'cidrs', 'comma-separated addresses or CIDRs the key may be used from (default: any)');
const LABEL = opt('label', 'text', 'a note for operators');
const EXPIRES_AT = opt('expires-at', 'ISO date', 'the key stops working at this time');
const TTL = opt('ttl', '30d', 'the key stops working after this long (units ms s m h d)');
const RATE_LIMIT = opt(
  'rate-limit',
  '100/s',
  'requests per second, minute or hour (/s /m /h); without one the policy defaultRateLimit applies',
);
const BURST = opt('burst', 'n', 'requests allowed at once above the rate (needs a rate)');
const CHANGES = [SCOPES, ALLOW_IP, LABEL, EXPIRES_AT, TTL];

const splitList = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0);

/** Turns the change flags into KeyChanges; a contradiction or a malformed value is a UsageError. */
function changesFrom(p: Parsed, nowMs: number): KeyChanges {
  const changes: KeyChanges = {};
  const scopes = splitList(str(p, 'scopes'));
  const allowIps = splitList(str(p, 'allow-ip'));
  const label = str(p, 'label');
  const expiresAt = str(p, 'expires-at');
  const ttl = str(p, 'ttl');
  const rateLimit = str(p, 'rate-limit');
  const burstText = str(p, 'burst');
  if (scopes) changes.scopes = scopes;
  if (allowIps) changes.allowIps = allowIps;
  if (label !== undefined) changes.label = label;
  if ([expiresAt !== undefined, ttl !== undefined, flag(p, 'no-expiry')].filter(Boolean).length > 1)
    throw new UsageError('use only one of --expires-at, --ttl, --no-expiry');
  if (expiresAt !== undefined) {
    const t = Date.parse(expiresAt);
    if (Number.isNaN(t)) throw new UsageError(`--expires-at: not a date: ${expiresAt}`);
    changes.expiresAt = new Date(t).toISOString();
  }
  if (ttl !== undefined) {
    const ms = parseDuration(ttl);
    if (ms === undefined || ms === 0) throw new UsageError(`--ttl: expected a duration like 30d, 12h, 90m, got ${ttl}`);
    changes.expiresAt = new Date(nowMs + ms).toISOString();
  }
  if (flag(p, 'no-expiry')) changes.expiresAt = null;
  let burst: number | undefined;
  if (burstText !== undefined) {
    if (!/^\d{1,7}$/.test(burstText) || Number(burstText) < 1)
      throw new UsageError(`--burst: expected a whole number of requests, got ${burstText}`);
    burst = Number(burstText);
  }
  if (rateLimit === 'none') {
    if (burst !== undefined) throw new UsageError('--burst cannot go with --rate-limit none');
    changes.rateLimit = null;
  } else if (rateLimit !== undefined) {
    changes.rateLimit = { rate: rateLimit, ...(burst !== undefined && { burst }) };
  } else if (burst !== undefined) {
    changes.burst = burst;
  }
  return changes;
}

const apiKeyOf = (p: Parsed) => p.args[0] as string;
const lastUsedAtOf = async (ctx: KeyContext, r: KeyRecord) => lastUsedAt(await ctx.store.getUsage(r.apiKey));

function table(rows: string[][]): string {
  const head = [
    'API KEY',
    'ID',
    'STATUS',
    'SCOPES',
    'ALLOW IPS',
    'RATE LIMIT',
    'LAST USED',
    'EXPIRES',
    'REVOKED',
    'OWNER',
    'LABEL',
  ];
  const all = [head, ...rows];
  const widths = head.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)));
  return `${all
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] as number))
        .join('  ')
        .trimEnd(),
    )
    .join('\n')}\n`;
}

const create: KeyAction = {
  spec: {
    name: 'create',
    summary: 'create a key and print its secret (shown only this once)',
    options: [OWNER, ...CHANGES, RATE_LIMIT, BURST, JSON_OPTION],
  },
  async run(ctx, p) {
    const changes = changesFrom(p, ctx.now());
    if (changes.burst !== undefined) throw new UsageError('--burst needs --rate-limit');
    const owner = str(p, 'owner');
    const { record } = ctx.must(await ctx.ops.create({ ...changes, ...(owner !== undefined && { owner }) }, ctx.actor));
    if (flag(p, 'json')) {
      ctx.print({
        apiKey: record.apiKey,
        apiSecret: record.secret,
        id: record.id,
        ...(record.owner && { owner: record.owner }),
        scopes: record.scopes,
        allowIps: record.allowIps,
        ...(record.label && { label: record.label }),
        ...(record.expiresAt && { expiresAt: record.expiresAt }),
        ...(record.rateLimit && { rateLimit: record.rateLimit }),
      });
      return;
    }
    ctx.out.write(
      `Created key ${record.id}\n  apiKey:    ${record.apiKey}\n  apiSecret: ${record.secret}\n${record.owner ? `  owner:     ${record.owner}\n` : ''}` +
        `  scopes:    ${record.scopes.join(',') || '(none)'}\n  allowIps:  ${record.allowIps.join(',') || '(any)'}\n  expires:   ${record.expiresAt ?? 'never'}\n` +
        `  rate limit: ${record.rateLimit ? describeRateLimit(record.rateLimit) : 'none (the policy defaultRateLimit applies, if any)'}\nThe secret is shown only now; store it safely.\n`,
    );
  },
};

const list: KeyAction = {
  spec: {
    name: 'list',
    summary: 'list keys (never their secrets), as a table or JSON',
    options: [
      opt('owner', 'account-id', 'only the keys of this account'),
      opt('state', 'active|revoked|expired', 'only keys in this state'),
      opt('sort', 'last-used', 'least recently used first, never used at the top'),
      JSON_OPTION,
    ],
  },
  async run(ctx, p) {
    const state = str(p, 'state');
    const sort = str(p, 'sort');
    const owner = str(p, 'owner');
    if (state !== undefined && !['active', 'revoked', 'expired'].includes(state))
      throw new UsageError('--state must be active, revoked or expired');
    if (sort !== undefined && sort !== 'last-used')
      throw new UsageError('--sort: only "last-used" (least recently used first, never used at the top)');
    const now = ctx.now();
    const keys = await ctx.ops.list({
      ...(owner !== undefined && { owner }),
      ...(state !== undefined && { state: state as KeyStatus }),
    });
    const used = await Promise.all(keys.map((r) => lastUsedAtOf(ctx, r)));
    const rows = keys.map((r, i) => ({ ...publicView(r, now), lastUsedAt: used[i] ?? null }));
    if (sort === 'last-used') rows.sort((x, y) => (x.lastUsedAt ?? '').localeCompare(y.lastUsedAt ?? ''));
    if (flag(p, 'json')) ctx.print(rows);
    else
      ctx.out.write(
        table(
          rows.map((r) => [
            r.apiKey,
            r.id,
            r.status,
            r.scopes.join(',') || '-',
            r.allowIps.join(',') || '-',
            describeRateLimit(r.rateLimit).replace('none', '-'),
            r.lastUsedAt ?? 'never',
            r.expiresAt ?? '-',
            r.revokedAt ? `${r.revokedAt}${r.revokeReason ? ` (${r.revokeReason})` : ''}` : '-',
            r.owner ?? '-',
            r.label ?? '',
          ]),
        ),
      );
  },
};

const show: KeyAction = {
  spec: {
    name: 'show',
    summary: 'print one key as JSON (never its secret)',
    args: ['<apiKey>'],
    options: [opt('json', undefined, 'print JSON (the default for show)')],
  },
  async run(ctx, p) {
    const r = await ctx.load(apiKeyOf(p));
    ctx.print({ ...publicView(r, ctx.now()), lastUsedAt: await lastUsedAtOf(ctx, r) });
  },
};

const usage: KeyAction = {
  spec: {
    name: 'usage',
    summary: `when a key was last used, and its requests per UTC day (kept ${USAGE_DAYS} days)`,
    args: ['<apiKey>'],
    options: [opt('days', 'n', `how many days to show, 1 to ${USAGE_DAYS} (default 30)`), JSON_OPTION],
  },
  async run(ctx, p) {
    const days = parseUsageDays(str(p, 'days'));
    if (days === undefined) throw new UsageError(`--days: ${USAGE_DAYS_RULE}`);
    const { record, usage: u } = ctx.must(await ctx.ops.usage(apiKeyOf(p)), apiKeyOf(p));
    const report = usageReport(record, u, days, ctx.now());
    if (flag(p, 'json')) ctx.print(report);
    else
      ctx.out.write(
        `${report.apiKey} (${report.id})\n  last used: ${report.lastUsedAt ?? 'never'}\n  requests, last ${days} days (UTC): ${report.total}\n${report.perDay.map((d) => `  ${d.day}  ${String(d.requests).padStart(9)}`).join('\n')}\n`,
      );
  },
};

const update: KeyAction = {
  spec: {
    name: 'update',
    summary: "change a key's scopes, addresses, label, expiry or rate limit; prints the key as JSON",
    args: ['<apiKey>'],
    options: [
      ...CHANGES,
      opt('no-expiry', undefined, 'remove the expiry'),
      opt('rate-limit', '100/s|none', 'a new rate (/s /m /h), or none: the policy defaultRateLimit applies'),
      BURST,
      opt('json', undefined, 'print JSON (the default for update)'),
    ],
  },
  async run(ctx, p) {
    const changes = changesFrom(p, ctx.now());
    if (Object.keys(changes).length === 0)
      throw new UsageError(
        'nothing to change (use --scopes, --allow-ip, --label, --expires-at, --ttl, --no-expiry, --rate-limit or --burst)',
      );
    ctx.print(publicView(ctx.must(await ctx.ops.update(apiKeyOf(p), changes, ctx.actor), apiKeyOf(p)), ctx.now()));
  },
};

const rotate: KeyAction = {
  spec: {
    name: 'rotate',
    summary: 'issue a new secret; the old one keeps working for the grace period',
    args: ['<apiKey>'],
    options: [opt('grace', '300s', 'how long the old secret stays valid (0 = stops at once)'), JSON_OPTION],
  },
  async run(ctx, p) {
    const grace = str(p, 'grace');
    const graceMs = parseDuration(grace ?? '300s');
    if (graceMs === undefined) throw new UsageError(`--grace: expected a duration like 300s or 10m, got ${grace}`);
    const {
      record,
      secret,
      previousSecretValidUntil: until,
    } = ctx.must(await ctx.ops.rotate(apiKeyOf(p), graceMs, ctx.actor), apiKeyOf(p));
    if (flag(p, 'json'))
      ctx.print({ apiKey: record.apiKey, apiSecret: secret, id: record.id, previousSecretValidUntil: until });
    else
      ctx.out.write(
        `Rotated ${record.apiKey} (${record.id})\n  new apiSecret: ${secret}\n  old secret accepted until ${until}\nThe new secret is shown only now.\n`,
      );
  },
};

const revoke: KeyAction = {
  spec: {
    name: 'revoke',
    summary: 'stop a key working everywhere at once (it stays listed as revoked)',
    args: ['<apiKey>'],
    options: [
      opt('reason', 'text', 'recorded on the key and in the audit entry'),
      opt('json', undefined, 'print the revoked key as JSON'),
    ],
  },
  async run(ctx, p) {
    const r = ctx.must(await ctx.ops.revoke(apiKeyOf(p), str(p, 'reason'), ctx.actor), apiKeyOf(p));
    if (flag(p, 'json')) ctx.print(publicView(r, ctx.now()));
    else ctx.out.write(`revoked ${r.apiKey} (${r.id})\n`);
  },
};

const remove: KeyAction = {
  spec: {
    name: 'delete',
    summary: 'delete a key, its rate-limit state and its usage',
    args: ['<apiKey>'],
    options: [opt('json', undefined, 'print {"deleted": apiKey, "id": id}')],
  },
  async run(ctx, p) {
    const r = ctx.must(await ctx.ops.remove(apiKeyOf(p), ctx.actor), apiKeyOf(p));
    if (flag(p, 'json')) ctx.print({ deleted: r.apiKey, id: r.id });
    else ctx.out.write(`deleted ${r.apiKey} (${r.id})\n`);
  },
};

/** Every `keygate keys` action, in the order help lists them. */
export const KEY_ACTIONS: readonly KeyAction[] = [
  create,
  list,
  show,
  usage,
  update,
  rotate,
  revoke,
  remove,
  exportAction,
  importAction,
  reencryptAction,
];
