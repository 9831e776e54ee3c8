// Tested in test/e2e/owner-limits.test.ts (keygate owners through main()).
import { describeRateLimit } from '../../policy/rate-limit-spec.js';
import type { OwnerView } from '../../operations/owner-operations.js';
import { escapeUnprintable } from '../../keys/printable-text.js';
import { UsageError } from '../cli-errors.js';
import { flag, str, type Command } from '../command-line.js';
import { JSON_OPTION, opt, type KeyAction } from './key-context.js';
import { asCommand } from './keys-command.js';
import { granularityOf, GRANULARITY_OPTION, outcomeText } from './key-read-actions.js';
import { creditsFrom, creditsLine, creditsTopUpAction } from './key-edit-actions.js';

const DETAILS = `An owner is the account a key belongs to (a key's --owner). Its own rate
limit is one budget shared by all its keys, taking precedence over the
policy's defaultOwnerRateLimit; a request passes only when the key's budget
and its owner's both have room for the route's cost. Owners live in Redis
beside the keys (embedded mode: the keys file's top-level owners:). A change
is audited, published to every running instance at once and acknowledged
like a key change (KEYGATE_REDIS_MIN_REPLICAS).
Exit status: 0 done, 1 the change was not durable or Redis did not answer, 2 usage.`;

const line = (o: OwnerView) =>
  `${escapeUnprintable(o.owner)}  ${o.rateLimit ? describeRateLimit(o.rateLimit) : 'none (the policy defaultOwnerRateLimit applies)'}${'home' in o && o.home !== undefined ? `  home ${o.home}` : ''}\n`;

const setAction: KeyAction = {
  spec: {
    name: 'set',
    summary: "set an owner's own rate limit, shared by all its keys (none removes it)",
    args: ['<owner>'],
    options: [
      opt(
        'rate-limit',
        '100/s|none',
        "the owner's budget (/s /m /h), or none: the policy defaultOwnerRateLimit applies",
      ),
      opt('burst', 'n', "requests (cost units) allowed at once above the rate (default: the rate's count)"),
      opt('home', 'region', "regions: the owner's home, where its keys' tokens are admitted (docs/regions.md)"),
      opt(
        'credits',
        'n|none',
        "credits shared by all the owner's keys, spent beside each key's own (none removes them)",
      ),
      opt('refill', 'n/day|n/month', 'sets the credits to n at 00:00 UTC every day, or on the 1st of every month'),
      JSON_OPTION,
    ],
  },
  async run(ctx, p) {
    const owner = p.args[0] as string;
    const rate = str(p, 'rate-limit');
    const burstText = str(p, 'burst');
    const home = str(p, 'home');
    const credits = creditsFrom(p);
    if (rate === undefined && credits === undefined && home === undefined)
      throw new UsageError('give --rate-limit <n/s|m|h> or --rate-limit none, --credits or --home <region>');
    if (rate === undefined && burstText !== undefined) throw new UsageError('--burst needs --rate-limit');
    if (home !== undefined) {
      const { warnings: moveWarnings, ...moved } = ctx.must(await ctx.owners.setHome(owner, home, ctx.actor));
      for (const w of moveWarnings) ctx.err.write(`warning: ${w}\n`);
      if (rate === undefined && credits === undefined) {
        if (flag(p, 'json')) ctx.print(moved);
        else ctx.out.write(line(moved));
        return;
      }
    }
    let burst: number | undefined;
    if (burstText !== undefined) {
      if (rate === 'none') throw new UsageError('--burst cannot go with --rate-limit none');
      if (!/^\d{1,7}$/.test(burstText) || Number(burstText) < 1)
        throw new UsageError(`--burst: expected a whole number, got ${burstText}`);
      burst = Number(burstText);
    }
    const spec =
      rate === undefined ? undefined : rate === 'none' ? null : { rate, ...(burst !== undefined && { burst }) };
    const { warnings, ...set } = ctx.must(
      await ctx.owners.set(
        owner,
        { ...(spec !== undefined && { rateLimit: spec }), ...(credits !== undefined && { credits }) },
        ctx.actor,
      ),
    );
    for (const w of warnings) ctx.err.write(`warning: ${w}\n`);
    if (flag(p, 'json')) ctx.print(set);
    else ctx.out.write(line(set));
  },
};

const showAction: KeyAction = {
  spec: {
    name: 'show',
    summary: "print an owner's own rate limit",
    args: ['<owner>'],
    options: [JSON_OPTION],
  },
  async run(ctx, p) {
    const o = ctx.must(await ctx.owners.get(p.args[0] as string));
    if (flag(p, 'json')) ctx.print(o);
    else {
      ctx.out.write(line(o));
      // What is left now: under its own limit (the CLI does not read the policy, so not under its default).
      if (o.budget)
        ctx.out.write(
          `  left now: ${o.budget.remaining} of ${o.budget.burst}, whole again in ${o.budget.resetSeconds} s\n`,
        );
      if (o.credits) ctx.out.write(`  credits ${creditsLine(o.credits)}`);
    }
  },
};

const creditsAction = creditsTopUpAction('owner', (ctx, owner, add) => ctx.owners.addCredits(owner, add, ctx.actor));

const listAction: KeyAction = {
  spec: { name: 'list', summary: 'list the owners with a rate limit of their own', options: [JSON_OPTION] },
  async run(ctx, p) {
    const all = await ctx.owners.list();
    if (flag(p, 'json')) ctx.print(all);
    else ctx.out.write(all.map(line).join(''));
  },
};

const usageAction: KeyAction = {
  spec: {
    name: 'usage',
    summary: "an owner's requests by outcome (the sum over its keys) per minute, hour or day",
    args: ['<owner>'],
    options: [GRANULARITY_OPTION, JSON_OPTION],
  },
  async run(ctx, p) {
    const granularity = granularityOf(str(p, 'granularity')) ?? 'hour';
    const report = ctx.must(await ctx.owners.outcomeUsage(p.args[0] as string, granularity));
    if (flag(p, 'json')) ctx.print(report);
    else ctx.out.write(outcomeText(escapeUnprintable(report.owner), report));
  },
};

/** `keygate owners set|show|list|usage`: the same store, context and audit as `keygate keys`. */
export const ownersCommand: Command = {
  spec: { name: 'owners', summary: "manage owners' own rate limits in Redis", options: [], details: DETAILS },
  subcommands: [setAction, showAction, listAction, usageAction, creditsAction].map(asCommand),
};
