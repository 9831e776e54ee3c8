// Tested in test/unit/keys-actions.test.ts (each action through main()).
import type { KeyChanges } from '../../keys/key-changes.js';
import { parseDuration } from '../../keys/key-changes.js';
import { publicView, type KeyRecord } from '../../keys/key-record.js';
import { describeRateLimit } from '../../policy/rate-limit-spec.js';
import { parseCredits, parseRefill, type CreditsView } from '../../keys/credits.js';
import type { Done } from '../../operations/outcome.js';
import { UsageError } from '../cli-errors.js';
import { flag, str, type Parsed } from '../command-line.js';
import { apiKeyOf, JSON_OPTION, opt, warnPlainSecrets, type KeyAction, type KeyContext } from './key-context.js';
import { credentialFrom, CREDENTIAL_OPTIONS } from './key-credential-options.js';

/** `keygate keys create` and `update`: the flags that set a key's fields, read into KeyChanges. */

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
const BINDING = opt(
  'binding',
  'off|required',
  'required: every token must name its method and path (and body_sha256 with a body); default off',
);
const HOME = opt(
  'home',
  'region',
  "regions: the key's home, where its tokens are admitted (default: its owner's, else KEYGATE_REGION)",
);
const CREDITS = opt(
  'credits',
  'n|none',
  "the key's credits: each request spends its route's cost (none removes them: unlimited)",
);
const REFILL = opt(
  'refill',
  'n/day|n/month',
  'sets the credits to n at 00:00 UTC every day, or on the 1st of every month',
);
const CHANGES = [SCOPES, ALLOW_IP, LABEL, EXPIRES_AT, TTL, BINDING, CREDITS, REFILL, HOME];

/** --credits and --refill as the credits to set (undefined: not given; null: none). */
export function creditsFrom(p: Parsed): KeyChanges['credits'] {
  const credits = str(p, 'credits');
  const refillText = str(p, 'refill');
  if (credits === undefined) {
    if (refillText !== undefined) throw new UsageError('--refill needs --credits (the balance to start from)');
    return undefined;
  }
  if (credits === 'none') {
    if (refillText !== undefined) throw new UsageError('--refill cannot go with --credits none');
    return null;
  }
  const problems: string[] = [];
  const remaining = /^\d{1,16}$/.test(credits) ? Number(credits) : NaN;
  const refill = refillText === undefined ? undefined : parseRefill(refillText, '--refill', problems);
  const spec = parseCredits({ remaining, ...(refill && { refill }) }, '--credits', problems);
  if (problems.length > 0 || !spec)
    throw new UsageError(problems.join('; ').replace('--credits.remaining', '--credits'));
  return spec;
}

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
  const binding = str(p, 'binding');
  const home = str(p, 'home');
  if (home !== undefined) changes.home = home;
  if (scopes) changes.scopes = scopes;
  const credits = creditsFrom(p);
  if (credits !== undefined) changes.credits = credits;
  if (binding !== undefined) {
    if (binding !== 'off' && binding !== 'required')
      throw new UsageError(`--binding: expected off or required, got ${binding}`);
    changes.binding = binding;
  }
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

export const createAction: KeyAction = {
  spec: {
    name: 'create',
    summary: 'create a key and print its secret (shown only this once), or register a client public key',
    options: [OWNER, ...CHANGES, RATE_LIMIT, BURST, ...CREDENTIAL_OPTIONS, JSON_OPTION],
  },
  async run(ctx, p) {
    const changes = changesFrom(p, ctx.now());
    if (changes.burst !== undefined) throw new UsageError('--burst needs --rate-limit');
    const owner = str(p, 'owner');
    const credential = credentialFrom(p);
    const { record } = ctx.must(
      await ctx.ops.create({ ...changes, ...credential, ...(owner !== undefined && { owner }) }, ctx.actor),
    );
    if (record.secret === undefined) return printPublicKeyKey(ctx, record, flag(p, 'json'));
    warnPlainSecrets(ctx, 1);
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
        ...(record.binding && { binding: record.binding }),
        ...(record.credits && { credits: await ctx.ops.credits(record) }),
      });
      return;
    }
    ctx.out.write(
      `Created key ${record.id}\n  apiKey:    ${record.apiKey}\n  apiSecret: ${record.secret}\n${record.owner ? `  owner:     ${record.owner}\n` : ''}` +
        `  scopes:    ${record.scopes.join(',') || '(none)'}\n  allowIps:  ${record.allowIps.join(',') || '(any)'}\n  expires:   ${record.expiresAt ?? 'never'}\n` +
        `  rate limit: ${record.rateLimit ? describeRateLimit(record.rateLimit) : 'none (the policy defaultRateLimit applies, if any)'}\n` +
        `  binding:   ${record.binding ?? 'off'}\n` +
        (record.credits
          ? `  credits:   ${record.credits.remaining}${record.credits.refill ? `, refilled to ${record.credits.refill.amount} every ${record.credits.refill.interval}` : ''}\n`
          : '') +
        'The secret is shown only now; store it safely.\n',
    );
  },
};

/** An EdDSA/ES256 key: nothing secret to show, only what identifies the key and its public key. */
function printPublicKeyKey(ctx: KeyContext, record: KeyRecord, json: boolean): void {
  const view = publicView(record, ctx.now());
  if (json) {
    ctx.print({
      apiKey: view.apiKey,
      id: view.id,
      alg: view.alg,
      publicKeyFingerprint: view.publicKeyFingerprint,
      ...(view.owner && { owner: view.owner }),
      scopes: view.scopes,
      allowIps: view.allowIps,
      ...(view.binding && { binding: view.binding }),
    });
    return;
  }
  ctx.out.write(
    `Created key ${view.id}\n  apiKey:    ${view.apiKey}\n  alg:       ${view.alg}\n  publicKey: ${view.publicKeyFingerprint}\n` +
      `${view.owner ? `  owner:     ${view.owner}\n` : ''}  scopes:    ${view.scopes.join(',') || '(none)'}\n  allowIps:  ${view.allowIps.join(',') || '(any)'}\n` +
      `The client signs with its private key; Keygate holds no secret for this key.\n`,
  );
}

export const updateAction: KeyAction = {
  spec: {
    name: 'update',
    summary: "change a key's scopes, addresses, label, expiry, rate limit, binding or credits; prints the key as JSON",
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
        'nothing to change (use --scopes, --allow-ip, --label, --expires-at, --ttl, --no-expiry, --rate-limit, --burst, --binding, --credits, --refill or --home)',
      );
    const updated = await ctx.ops.update(apiKeyOf(p), changes, ctx.actor);
    const record = ctx.must(updated, apiKeyOf(p));
    for (const w of (updated.ok && updated.warnings) || []) ctx.err.write(`warning: ${w}\n`);
    ctx.print({
      ...publicView(record, ctx.now()),
      ...(record.credits && { credits: await ctx.ops.credits(record) }),
    });
  },
};

/**
 * `keys credits` and `owners credits`: a top-up by n, atomic with the requests' spends; prints what is left.
 * `addCredits` is the operation the management API calls too.
 */
export function creditsTopUpAction(
  whose: 'key' | 'owner',
  addCredits: (ctx: Parameters<KeyAction['run']>[0], id: string, add: number) => Promise<Done<CreditsView>>,
): KeyAction {
  return {
    spec: {
      name: 'credits',
      summary: `top up ${whose === 'key' ? "a key's credits" : "an owner's credits"} by n (atomic with ${whose === 'key' ? 'its requests' : 'its keys'}' spends); prints what is left`,
      args: [whose === 'key' ? '<apiKey>' : '<owner>'],
      options: [opt('add', 'n', 'how many credits to add'), JSON_OPTION],
    },
    async run(ctx, p) {
      const addText = str(p, 'add');
      if (addText === undefined) throw new UsageError('give --add <n>');
      const add = /^\d{1,16}$/.test(addText) ? Number(addText) : NaN;
      const id = whose === 'key' ? apiKeyOf(p) : (p.args[0] as string);
      const view = ctx.must(await addCredits(ctx, id, add), whose === 'key' ? id : undefined);
      if (flag(p, 'json')) ctx.print(view);
      else ctx.out.write(creditsLine(view));
    },
  };
}

export const creditsAction = creditsTopUpAction('key', (ctx, apiKey, add) =>
  ctx.ops.addCredits(apiKey, add, ctx.actor),
);

/** `remaining: 1200, next refill 2026-12-01T00:00:00.000Z (to 10000)` */
export const creditsLine = (v: CreditsView): string =>
  `remaining: ${v.remaining}${v.nextRefillAt ? `, next refill ${v.nextRefillAt} (to ${v.refill?.amount ?? 0})` : ', no refill'}\n`;
