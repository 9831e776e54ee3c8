// Tested in test/unit/keys-actions.test.ts (each action through main()).
import { publicView, type KeyRecord, type KeyStatus } from '../../keys/key-record.js';
import { lastUsedAt, parseUsageDays, usageReport, USAGE_DAYS, USAGE_DAYS_RULE } from '../../keys/key-usage.js';
import { escapeUnprintable } from '../../keys/printable-text.js';
import {
  GRANULARITY_RULE,
  parseGranularity,
  type Granularity,
  type OutcomeName,
  type outcomeReport,
} from '../../keys/outcome-usage.js';
import { describeRateLimit } from '../../policy/rate-limit-spec.js';
import { CURSOR, MAX_PAGE } from '../../operations/key-listing.js';
import { UsageError } from '../cli-errors.js';
import { flag, str } from '../command-line.js';
import { apiKeyOf, JSON_OPTION, opt, type KeyAction, type KeyContext } from './key-context.js';

/** `keygate keys list`, `show` and `usage`: the actions that change nothing. */

const lastUsedAtOf = async (ctx: KeyContext, r: KeyRecord) => lastUsedAt(await ctx.store.getUsage(r.apiKey));

function table(rows: string[][]): string {
  const head = [
    'API KEY',
    'ID',
    'STATUS',
    'ALG',
    'SCOPES',
    'ALLOW IPS',
    'RATE LIMIT',
    'LAST USED',
    'EXPIRES',
    'REVOKED',
    'OWNER',
    'LABEL',
  ];
  // A stored label or reason may hold what rewrites a terminal line (stored before the rule, or
  // written around it): every cell is printed escaped, so no row can forge another.
  const all = [head, ...rows.map((r) => r.map(escapeUnprintable))];
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

export const listAction: KeyAction = {
  spec: {
    name: 'list',
    summary: 'list keys (never their secrets), as a table or JSON',
    options: [
      opt('owner', 'account-id', 'only the keys of this account'),
      opt('state', 'active|revoked|expired', 'only keys in this state'),
      opt('sort', 'last-used', 'least recently used first, never used at the top'),
      opt('limit', 'n', `one page of at most n keys (1 to ${MAX_PAGE}); the next page's cursor goes to stderr`),
      opt('cursor', 'cursor', 'the page after the one that printed this cursor (with --limit)'),
      JSON_OPTION,
    ],
  },
  async run(ctx, p) {
    const state = str(p, 'state');
    const sort = str(p, 'sort');
    const owner = str(p, 'owner');
    const rawLimit = str(p, 'limit');
    const cursor = str(p, 'cursor');
    if (state !== undefined && !['active', 'revoked', 'expired'].includes(state))
      throw new UsageError('--state must be active, revoked or expired');
    if (sort !== undefined && sort !== 'last-used')
      throw new UsageError('--sort: only "last-used" (least recently used first, never used at the top)');
    const limit = rawLimit !== undefined && /^\d{1,4}$/.test(rawLimit) ? Number(rawLimit) : undefined;
    if (rawLimit !== undefined && (limit === undefined || limit < 1 || limit > MAX_PAGE))
      throw new UsageError(`--limit: a whole number from 1 to ${MAX_PAGE}`);
    if (cursor !== undefined && (limit === undefined || !CURSOR.test(cursor)))
      throw new UsageError('--cursor: a cursor printed by a list with --limit, given with --limit');
    if (sort !== undefined && limit !== undefined)
      throw new UsageError('--sort orders the whole list: not with --limit');
    const filter = {
      ...(owner !== undefined && { owner }),
      ...(state !== undefined && { state: state as KeyStatus }),
    };
    // The same paged reads as GET /v1/keys: one page, or every page in turn (never every key at once).
    const keys: KeyRecord[] = [];
    let nextCursor: string | null = null;
    if (limit !== undefined) {
      const page = await ctx.ops.list(filter, { limit, ...(cursor !== undefined && { cursor }) });
      keys.push(...page.records);
      nextCursor = page.nextCursor;
    } else {
      // The whole list of 100k keys takes seconds: a count on a terminal meanwhile (the total only unfiltered).
      const filtered = owner !== undefined || state !== undefined;
      const progress = ctx.progress('listing', filtered ? undefined : await ctx.store.countKeys());
      try {
        for await (const page of ctx.ops.listAll(filter)) {
          keys.push(...page);
          progress.advance(page.length);
        }
      } finally {
        progress.done();
      }
    }
    const now = ctx.now();
    const used = await Promise.all(keys.map((r) => lastUsedAtOf(ctx, r)));
    const rows = keys.map((r, i) => ({ ...publicView(r, now), lastUsedAt: used[i] ?? null }));
    if (sort === 'last-used') rows.sort((x, y) => (x.lastUsedAt ?? '').localeCompare(y.lastUsedAt ?? ''));
    if (flag(p, 'json')) ctx.print(limit === undefined ? rows : { keys: rows, nextCursor });
    else
      ctx.out.write(
        table(
          rows.map((r) => [
            r.apiKey,
            r.id,
            r.status,
            r.alg,
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
    if (limit !== undefined && nextCursor !== null && !flag(p, 'json'))
      ctx.err.write(`more keys follow: --cursor ${nextCursor}\n`);
  },
};

export const showAction: KeyAction = {
  spec: {
    name: 'show',
    summary: 'print one key as JSON (never its secret)',
    args: ['<apiKey>'],
    options: [opt('json', undefined, 'print JSON (the default for show)')],
  },
  async run(ctx, p) {
    const r = await ctx.load(apiKeyOf(p));
    ctx.print({
      ...publicView(r, ctx.now()),
      lastUsedAt: await lastUsedAtOf(ctx, r),
      // What is left now and the next refill (the admit state's balance), not the value as set.
      ...(r.credits && { credits: await ctx.ops.credits(r) }),
    });
  },
};

/** --granularity of `keys usage` and `owners usage`. */
export const GRANULARITY_OPTION = opt(
  'granularity',
  'minute|hour|day',
  'requests by outcome per minute (last 24 h), hour (30 days) or day (365 days)',
);

/** The granularity given, or undefined when none; a UsageError names the rule otherwise. */
export function granularityOf(raw: string | undefined): Granularity | undefined {
  if (raw === undefined) return undefined;
  const g = parseGranularity(raw);
  if (g === undefined) throw new UsageError(`--granularity: ${GRANULARITY_RULE}`);
  return g;
}

/** A report by outcome as text: the totals, then each bucket that counted anything (a quiet bucket is a blank row). */
export function outcomeText(heading: string, report: ReturnType<typeof outcomeReport>): string {
  const cols = report.outcomes;
  const row = (start: string, counts: Readonly<Record<OutcomeName, number>>) =>
    `  ${start.padEnd(24)}${cols.map((o) => String(counts[o] ?? 0).padStart(o.length + 2)).join('')}`;
  const busy = report.buckets.filter((b) => cols.some((o) => b[o] > 0));
  return (
    `${heading}\n  by outcome per ${report.granularity}, ${report.from} to ${report.to} (UTC); ${busy.length} of ${report.buckets.length} buckets counted anything\n` +
    `  ${'start'.padEnd(24)}${cols.map((o) => `  ${o}`).join('')}\n` +
    [...busy.map((b) => row(b.start, b)), row('total', report.totals)].join('\n') +
    '\n'
  );
}

export const usageAction: KeyAction = {
  spec: {
    name: 'usage',
    summary: `when a key was last used, and its requests and spent cost per UTC day (kept ${USAGE_DAYS} days); with --granularity, its requests by outcome`,
    args: ['<apiKey>'],
    options: [
      opt('days', 'n', `how many days to show, 1 to ${USAGE_DAYS} (default 30)`),
      GRANULARITY_OPTION,
      JSON_OPTION,
    ],
  },
  async run(ctx, p) {
    const granularity = granularityOf(str(p, 'granularity'));
    if (granularity !== undefined) {
      if (str(p, 'days') !== undefined)
        throw new UsageError('--days: not with --granularity (a report is one or the other)');
      const report = ctx.must(await ctx.ops.outcomeUsage(apiKeyOf(p), granularity), apiKeyOf(p));
      if (flag(p, 'json')) ctx.print(report);
      else ctx.out.write(outcomeText(`${report.apiKey} (${report.id})`, report));
      return;
    }
    const days = parseUsageDays(str(p, 'days'));
    if (days === undefined) throw new UsageError(`--days: ${USAGE_DAYS_RULE}`);
    const { record, usage: u } = ctx.must(await ctx.ops.usage(apiKeyOf(p)), apiKeyOf(p));
    const report = usageReport(record, u, days, ctx.now());
    if (flag(p, 'json')) ctx.print(report);
    else
      ctx.out.write(
        `${report.apiKey} (${report.id})\n  last used: ${report.lastUsedAt ?? 'never'}\n  requests, last ${days} days (UTC): ${report.total}\n  cost spent, last ${days} days (UTC): ${report.cost}\n  day         requests       cost\n${report.perDay.map((d) => `  ${d.day}  ${String(d.requests).padStart(9)}  ${String(d.cost).padStart(9)}`).join('\n')}\n`,
      );
  },
};
