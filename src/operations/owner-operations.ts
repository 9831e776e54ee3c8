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
import type { AuditEntry, OwnerStore } from '../store/store.js';
import { invalid, type Done } from './outcome.js';
import { ownerHomeProblems, type HomeRules } from './homes.js';
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
  get(owner: string): Promise<Done<OwnerView & { budget: OwnerBudget | null }>>;
  /** Every owner with settings of its own, by name. */
  list(): Promise<readonly OwnerView[]>;
  /**
   * Sets the owner's own limit (null removes it), audited and announced to every instance; the owner as
   * set, with `warnings` (empty when none): a burst below the policy's largest route cost.
   */
  setRateLimit(owner: string, rateLimit: unknown, actor: string): Promise<Done<OwnerView & { warnings: string[] }>>;
  /**
   * Regions: sets the owner's home (its keys' home: docs/regions.md), its limit kept; a move is stamped with its
   * time, from which the new home refuses older nonces for a while (home_moved).
   */
  setHome(owner: string, home: string, actor: string): Promise<Done<OwnerView>>;
}

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
  store: OwnerStore;
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
      return { ok: true, value: { ...view(owner, record), budget } };
    },
    async list() {
      return (await store.listOwners()).map((r) => view(r.owner, r));
    },
    async setRateLimit(owner, rateLimit, actor) {
      const problems: string[] = [];
      checkOwnerName(owner, 'owner', problems);
      const spec: RateLimitSpec | undefined = parseRateLimitSpec(rateLimit, 'owner.rateLimit', problems);
      if (problems.length > 0) return invalid(problems);
      const t = now();
      const at = new Date(t).toISOString();
      // The owner's home stays as it is: a limit is set apart from it.
      const before = await store.readOwner(owner);
      const record: OwnerRecord = {
        owner,
        ...(spec && { rateLimit: spec, updatedAt: at }),
        ...(before?.home !== undefined && { home: before.home, updatedAt: at }),
        ...(before?.homeMovedAtMs !== undefined && { homeMovedAtMs: before.homeMovedAtMs }),
      };
      // An owner's entry names no key: apiKey and id are empty.
      const entry = auditEntry(
        t,
        actor,
        'owner-set',
        { apiKey: '', id: '', owner },
        {
          detail: `rateLimit=${describeRateLimit(spec)}`,
        },
      );
      await store.putOwner(record, entry);
      deps.audit(entry);
      const warnings: string[] = [];
      const costliest = deps.costliestRoute?.();
      const burst = spec && compileRateLimit(spec, OWNER_POLICY_NAME).burst;
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
      const t = now();
      const before = await store.readOwner(owner);
      const moved = (before?.home ?? deps.regions?.defaultHome) !== home;
      const record: OwnerRecord = {
        owner,
        ...(before?.rateLimit && { rateLimit: before.rateLimit }),
        updatedAt: new Date(t).toISOString(),
        home,
        ...((moved || before?.homeMovedAtMs !== undefined) && {
          homeMovedAtMs: moved ? t : before?.homeMovedAtMs,
        }),
      };
      const entry = auditEntry(t, actor, 'owner-set', { apiKey: '', id: '', owner }, { detail: `home=${home}` });
      await store.putOwner(record, entry);
      deps.audit(entry);
      return { ok: true, value: view(owner, record) };
    },
  };
}
