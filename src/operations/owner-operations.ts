import { checkOwnerName, ownerView, type OwnerRecord } from '../keys/owner-record.js';
import { describeRateLimit, parseRateLimitSpec, type RateLimitSpec } from '../policy/rate-limit-spec.js';
import type { AuditEntry, Store } from '../store/store.js';
import type { Done } from './key-operations.js';

/** An owner as shown: its own limit (null: none of its own, the policy's defaultOwnerRateLimit applies). */
export type OwnerView = ReturnType<typeof ownerView>;

export interface OwnerOperations {
  /** The owner's own settings; an owner without any is shown with `rateLimit: null` (never 404: any name may own keys). */
  get(owner: string): Promise<Done<OwnerView>>;
  /** Every owner with settings of its own, by name. */
  list(): Promise<readonly OwnerView[]>;
  /** Sets the owner's own limit (null removes it), audited and announced to every instance; the owner as set. */
  setRateLimit(owner: string, rateLimit: unknown, actor: string): Promise<Done<OwnerView>>;
}

const invalid = (problems: readonly string[]) => ({ ok: false as const, refused: 'invalid' as const, problems });

/**
 * The one code path for owners' settings (issue 42), shared by `keygate owners` and the management
 * API's /v1/owners/{owner}, beside key-operations.ts: validate, then one atomic store write with its
 * audit entry (Store.putOwner), which every instance's owner table picks up from its change message.
 * A set replaces the owner's limit whole, so a retried set is harmless: no version to compare.
 */
export function createOwnerOperations(deps: {
  store: Store;
  now: () => number;
  audit: (entry: AuditEntry) => void;
}): OwnerOperations {
  const { store, now } = deps;
  const view = (owner: string, r: OwnerRecord | null) => ownerView(r ?? { owner });
  return {
    async get(owner) {
      const problems: string[] = [];
      if (!checkOwnerName(owner, 'owner', problems)) return invalid(problems);
      return { ok: true, value: view(owner, await store.readOwner(owner)) };
    },
    async list() {
      return (await store.listOwners()).map((r) => view(r.owner, r));
    },
    async setRateLimit(owner, rateLimit, actor) {
      const problems: string[] = [];
      checkOwnerName(owner, 'owner', problems);
      const spec: RateLimitSpec | undefined = parseRateLimitSpec(rateLimit, 'owner.rateLimit', problems);
      if (problems.length > 0) return invalid(problems);
      const at = new Date(now()).toISOString();
      const record: OwnerRecord = { owner, ...(spec && { rateLimit: spec, updatedAt: at }) };
      // An owner's entry names no key: apiKey and id are empty, the owner is in the detail.
      const entry: AuditEntry = {
        at,
        actor,
        action: 'owner-set',
        apiKey: '',
        id: '',
        detail: `owner=${owner}; rateLimit=${describeRateLimit(spec)}`,
      };
      await store.putOwner(record, entry);
      deps.audit(entry);
      return { ok: true, value: view(owner, record) };
    },
  };
}
