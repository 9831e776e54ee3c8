// Tested in test/e2e/owner-limits.test.ts.
import { checkOwnerName, ownerView, type OwnerRecord } from '../keys/owner-record.js';
import {
  compileRateLimit,
  describeRateLimit,
  OWNER_POLICY_NAME,
  parseRateLimitSpec,
  type CompiledLimit,
  type RateLimitSpec,
} from '../policy/rate-limit-spec.js';
import type {
  AuditEntry,
  CreditHolder,
  CreditStore,
  KeyRecordStore,
  OutcomeStore,
  OwnerStore,
} from '../store/store.js';
import { outcomeReport, type Granularity } from '../keys/outcome-usage.js';
import { conflict, done, invalid, type Done } from './outcome.js';
import { carryCredits, CREDITS_NOT_CARRIED, ownerHomeProblems, type HomeRules } from './homes.js';
import { createKeyListing } from './key-listing.js';
import {
  compileCredits,
  nextSetAt,
  OWNER_CREDITS_NAME,
  parseCredits,
  type CreditsSpec,
  type CreditsView,
} from '../keys/credits.js';
import { checkTopUp, creditsView } from './credits-view.js';
import { auditEntry } from '../store/audit-entry.js';

/** An owner as shown: its own limit (null: none of its own, the policy's defaultOwnerRateLimit applies). */
export type OwnerView = ReturnType<typeof ownerView>;

/**
 * Where the owner's budget stands now (GET /v1/owners/{owner}, the console): which limit applies (its
 * own, or the policy's default), its burst, what is left in cost units and when it is whole again.
 * null: no owner budget applies to it.
 */
export interface OwnerBudget {
  readonly source: 'owner' | 'policy';
  readonly burst: number;
  readonly remaining: number;
  readonly resetSeconds: number;
}

export interface OwnerOperations {
  /** The owner's own settings; an owner without any is shown with `rateLimit: null` (never 404: any name may own keys). */
  get(
    owner: string,
  ): Promise<Done<Omit<OwnerView, 'credits'> & { budget: OwnerBudget | null; credits: CreditsView | null }>>;
  /** Every owner with settings of its own, by name. */
  list(): Promise<readonly OwnerView[]>;
  /**
   * Sets the owner's own limit (null removes it), audited and announced to every instance; the owner as
   * set, with `warnings` (empty when none): a burst below the policy's largest route cost.
   */
  setRateLimit(owner: string, rateLimit: unknown, actor: string): Promise<Done<OwnerView & { warnings: string[] }>>;
  /**
   * The owner's usage by outcome at a granularity: the sum over its keys, kept per owner when written
   * (keys/outcome-usage.ts). Any name may own keys: an owner nothing was counted for has zeros.
   */
  outcomeUsage(owner: string, granularity: Granularity): Promise<Done<OwnerOutcomeReport>>;
  /**
   * Regions: sets the owner's home (its keys' home: docs/regions.md), its limit kept; a move is stamped with its
   * time, from which the new home refuses older nonces for a while (home_moved). Before the move is written, the
   * credits balances of the owner and of its keys with credits are carried to the new home; `warnings` says when
   * they could not be (the move is made all the same).
   */
  setHome(owner: string, home: string, actor: string): Promise<Done<OwnerView & { warnings: string[] }>>;
  /**
   * Sets what is given and keeps the rest: `rateLimit` and `credits` each a value, null (removed) or
   * undefined (kept as it is). Setting credits starts the owner's balance again from `remaining`.
   */
  set(
    owner: string,
    settings: { rateLimit?: unknown; credits?: unknown },
    actor: string,
  ): Promise<Done<OwnerView & { warnings: string[] }>>;
  /** Adds to the owner's credits in one atomic step with its keys' spends; answers the balance after it. */
  addCredits(owner: string, add: unknown, actor: string): Promise<Done<CreditsView>>;
}

/** An owner's usage by outcome, as reported. */
export type OwnerOutcomeReport = { owner: string } & ReturnType<typeof outcomeReport>;

/** The policy's costliest route, for the warning a burst below it deserves. */
export interface CostliestRoute {
  readonly cost?: number;
  readonly pattern: string;
  readonly where: string;
}

/**
 * The one code path for owners' settings, shared by `keygate owners` and the management
 * API's /v1/owners/{owner}, beside key-operations.ts: validate, then one atomic store write with its
 * audit entry (Store.putOwner), which every instance's owner table picks up from its change message.
 * A set replaces the owner's limit whole, so a retried set is harmless: no version to compare.
 */
export function createOwnerOperations(deps: {
  store: OwnerStore &
    CreditStore &
    Pick<KeyRecordStore, 'appendAudit' | 'listKeys'> &
    Pick<OutcomeStore, 'getOutcomeUsage'>;
  now: () => number;
  audit: (entry: AuditEntry) => void;
  /** The policy's defaultOwnerRateLimit in force (the serving process's; the CLI has none). */
  defaultOwnerRateLimit?: () => CompiledLimit | undefined;
  /** The policy's route of the largest cost (routes.ts largestRouteCost); undefined when none costs more than 1. */
  costliestRoute?: () => CostliestRoute | undefined;
  /** Regions (homes.ts); undefined: off, and a home is refused. */
  regions?: HomeRules | undefined;
}): OwnerOperations {
  const { store, now } = deps;
  const view = (owner: string, r: OwnerRecord | null) => ownerView(r ?? { owner });
  const { listAll } = createKeyListing({ store, now });
  /** Whose balances an owner's move carries: the owner's own, and each of its keys' that has credits. */
  async function holdersOf(owner: string, record: OwnerRecord | null): Promise<CreditHolder[]> {
    const holders: CreditHolder[] = record?.credits ? [{ kind: 'owner', owner }] : [];
    for await (const page of listAll({ owner }))
      for (const k of page) if (k.credits) holders.push({ kind: 'key', apiKey: k.apiKey, owner });
    return holders;
  }
  return {
    async get(owner) {
      const problems: string[] = [];
      if (!checkOwnerName(owner, 'owner', problems)) return invalid(problems);
      const record = await store.readOwner(owner);
      // The limit the admit step applies: the owner's own, else the policy's default (authenticate.ts chargeFor).
      const own = record?.rateLimit && compileRateLimit(record.rateLimit, OWNER_POLICY_NAME);
      const limit = own ?? deps.defaultOwnerRateLimit?.();
      let budget: OwnerBudget | null = null;
      if (limit) {
        const state = await store.ownerBudget(owner, limit);
        budget = {
          source: own ? 'owner' : 'policy',
          burst: limit.burst,
          remaining: state.remaining,
          resetSeconds: Math.ceil(state.resetUs / 1_000_000),
        };
      }
      const spec = record?.credits && compileCredits(record.credits, OWNER_CREDITS_NAME);
      const credits = spec
        ? creditsView(record.credits, await store.readCredits({ kind: 'owner', owner, spec }), now())
        : null;
      return { ok: true, value: { ...view(owner, record), budget, credits } };
    },
    async outcomeUsage(owner, granularity) {
      const problems: string[] = [];
      if (!checkOwnerName(owner, 'owner', problems)) return invalid(problems);
      const rings = await store.getOutcomeUsage({ owner });
      return { ok: true, value: { owner, ...outcomeReport(rings, granularity, now()) } };
    },
    async list() {
      return (await store.listOwners()).map((r) => view(r.owner, r));
    },
    setRateLimit(owner, rateLimit, actor) {
      return this.set(owner, { rateLimit }, actor);
    },
    async set(owner, settings, actor) {
      const problems: string[] = [];
      checkOwnerName(owner, 'owner', problems);
      const spec: RateLimitSpec | undefined =
        settings.rateLimit === undefined
          ? undefined
          : parseRateLimitSpec(settings.rateLimit, 'owner.rateLimit', problems);
      const creditsIn =
        settings.credits === undefined || settings.credits === null
          ? undefined
          : parseCredits(settings.credits, 'owner.credits', problems);
      if (creditsIn?.setAt !== undefined) problems.push('owner.credits.setAt: set by Keygate, not given');
      if (problems.length > 0) return invalid(problems);
      const current = await store.readOwner(owner);
      const t = now();
      const at = new Date(t).toISOString();
      const rateLimitNext = settings.rateLimit === undefined ? current?.rateLimit : spec;
      const creditsNext: CreditsSpec | undefined =
        settings.credits === undefined
          ? current?.credits
          : creditsIn && { ...creditsIn, setAt: nextSetAt(current?.credits, t) };
      const record: OwnerRecord = {
        owner,
        ...(rateLimitNext && { rateLimit: rateLimitNext }),
        ...(creditsNext && { credits: creditsNext }),
        ...((rateLimitNext || creditsNext || current?.home !== undefined) && { updatedAt: at }),
        // The owner's home stays as it is: set apart from the limit and the credits (setHome).
        ...(current?.home !== undefined && { home: current.home }),
        ...(current?.homeMovedAtMs !== undefined && { homeMovedAtMs: current.homeMovedAtMs }),
      };
      const creditsNote =
        settings.credits === undefined
          ? ''
          : `; credits=${creditsNext ? `${creditsNext.remaining}${creditsNext.refill ? ` refill ${creditsNext.refill.amount}/${creditsNext.refill.interval}` : ''}` : 'none'}`;
      // An owner's entry names no key: apiKey and id are empty.
      const entry = auditEntry(
        t,
        actor,
        'owner-set',
        { apiKey: '', id: '', owner },
        {
          detail: `rateLimit=${describeRateLimit(rateLimitNext)}${creditsNote}`,
        },
      );
      await store.putOwner(record, entry);
      deps.audit(entry);
      const warnings: string[] = [];
      const costliest = deps.costliestRoute?.();
      const burst = rateLimitNext && compileRateLimit(rateLimitNext, OWNER_POLICY_NAME).burst;
      if (burst !== undefined && costliest?.cost !== undefined && costliest.cost > burst)
        warnings.push(
          `owner ${owner}: burst ${burst} is below the cost ${costliest.cost} of route ${costliest.pattern} (${costliest.where}): ` +
            `its keys' requests to that route can never pass (429 cost_exceeds_burst); give a burst of at least ${costliest.cost}`,
        );
      return { ok: true, value: { ...view(owner, record), warnings } };
    },
    async setHome(owner, home, actor) {
      const problems: string[] = [];
      checkOwnerName(owner, 'owner', problems);
      problems.push(...ownerHomeProblems(deps.regions, home));
      if (problems.length > 0) return invalid(problems);
      const before = await store.readOwner(owner);
      const from = before?.home ?? deps.regions?.defaultHome;
      const moved = from !== home;
      // The balances first, then the move (docs/regions.md "Moving a home"); its time is taken after them.
      const warning =
        moved && from !== undefined
          ? await carryCredits(store, await holdersOf(owner, before), { from, to: home, whose: `owner ${owner}` })
          : undefined;
      const t = now();
      const record: OwnerRecord = {
        owner,
        ...(before?.rateLimit && { rateLimit: before.rateLimit }),
        ...(before?.credits && { credits: before.credits }),
        updatedAt: new Date(t).toISOString(),
        home,
        ...((moved || before?.homeMovedAtMs !== undefined) && {
          homeMovedAtMs: moved ? t : before?.homeMovedAtMs,
        }),
      };
      const detail = `home=${home}${warning === undefined ? '' : `; ${CREDITS_NOT_CARRIED}`}`;
      const entry = auditEntry(t, actor, 'owner-set', { apiKey: '', id: '', owner }, { detail });
      await store.putOwner(record, entry);
      deps.audit(entry);
      return { ok: true, value: { ...view(owner, record), warnings: warning === undefined ? [] : [warning] } };
    },
    async addCredits(owner, add, actor) {
      const problems: string[] = [];
      checkOwnerName(owner, 'owner', problems);
      const amount = checkTopUp(add, problems);
      if (amount === undefined || problems.length > 0) return invalid(problems);
      const record = await store.readOwner(owner);
      if (!record?.credits) return conflict(`owner ${owner} has no credits: set them first (owners set --credits)`);
      const spec = compileCredits(record.credits, OWNER_CREDITS_NAME);
      const state = await store.addCredits({ kind: 'owner', owner, spec }, amount);
      if (state === undefined) return invalid([`credits.add: would take the balance above ${Number.MAX_SAFE_INTEGER}`]);
      const entry = auditEntry(
        now(),
        actor,
        'credits-add',
        { apiKey: '', id: '', owner },
        { detail: `add=${amount} remaining=${state.remaining}` },
      );
      await store.appendAudit(entry);
      deps.audit(entry);
      return done(creditsView(record.credits, state, now()));
    },
  };
}
