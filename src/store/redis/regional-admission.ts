// Tested in test/e2e/regions-home.test.ts, test/e2e/regions-staleness.test.ts, test/e2e/regions-credits.test.ts.
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { KeyUsage } from '../../keys/key-usage.js';
import { mergeRings } from '../../keys/outcome-usage.js';
import type { Charge } from '../budgets.js';
import { effectiveHome, movedCutoffNs, type OwnerHomeRecord } from '../home.js';
import {
  HomeUnreachableError,
  HOME_MOVED,
  StoreUnavailableError,
  type Admission,
  type CreditTarget,
  type Store,
} from '../store.js';
import type { KeystoreFreshness } from './connection/keystore-freshness.js';
import { gatedByGroup, type RequestStateGroup } from './request-state-group.js';

export const FENCED: Admission = Object.freeze({ outcome: 'fenced' });

/** Balances a home move reads (then writes) in one go. */
const MOVE_BATCH = 1_000;

export interface RegionalAdmission {
  /** Store['admit'], always answered through a round trip. */
  admit(...args: Parameters<Store['admit']>): Promise<Admission>;
  spendFailedAuth: Store['spendFailedAuth'];
  /** A balance lives with the admit state: at the key's (or its owner's) home. */
  addCredits: Store['addCredits'];
  readCredits: Store['readCredits'];
  /** A home move's copy of balances from one region's request-state Redis to another's (Store.moveCredits). */
  moveCredits: NonNullable<Store['moveCredits']>;
  /** Counted in this instance's own region, where its requests were answered. */
  countOutcome: Store['countOutcome'];
  /** Every region's rings of the key or owner, merged (mergeRings). */
  getOutcomeUsage: Store['getOutcomeUsage'];
  /** Every region's counts of the key, summed (a key's home may have moved). */
  getUsage(apiKey: string): Promise<KeyUsage>;
  flushUsage(): Promise<void>;
  drop(apiKeys: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

/**
 * The admit step with regions on (docs/regions.md): refused while this region's keystore copy is stale
 * (keystore-freshness.ts), then run on the request-state group of the key's effective home (home.ts), this
 * region's or another's one round trip away. The admit itself is request-state.ts's, unchanged. A home whose
 * Redis does not answer (or whose group is fenced) is `home_unreachable`: nothing is admitted on a guess.
 * A nonce not after a move's cut-off is `home_moved`. The failed-authentication budget per IP stays in the
 * instance's own region.
 */
export function createRegionalAdmission(
  options: {
    self: string;
    defaultHome: string;
    maxStalenessMs: number;
    /**
     * The move is stamped before its commit, which is acknowledged within the command deadline (or fails):
     * added to the cut-off, so a move that landed that much after its stamp is still covered.
     */
    commitMarginMs?: number;
    /** The largest recv_window the policy in force allows, in ms (it may reload). */
    maxRecvWindowMs: () => number;
  },
  deps: {
    groups: ReadonlyMap<string, RequestStateGroup>;
    freshness: Pick<KeystoreFreshness, 'refusal'>;
    ownerHome(owner: string): OwnerHomeRecord | undefined;
    logger: Logger;
    /** A remote admit's round trip, in seconds, by home (metrics). */
    onRemoteAdmit?: (home: string, seconds: number) => void;
  },
): RegionalAdmission {
  const own = deps.groups.get(options.self);
  if (own === undefined) throw new Error(`regions: no request-state group for this region ${options.self}`);
  const all = [...deps.groups.values()];

  function admitAt(
    group: RequestStateGroup,
    apiKey: string,
    nonce: string,
    ttlMs: number,
    charge: Charge | undefined,
    nonceNs: bigint | undefined,
  ): Promise<Admission> {
    // The group's own fence, before and after: a failover of its master seen while the admit was under way
    // may have put the nonce on a master that never knew it was used.
    if (nonceNs !== undefined && nonceNs < group.fence.fenceNs()) return Promise.resolve(FENCED);
    return gatedByGroup(group, () => group.state.admit(apiKey, nonce, ttlMs, charge)).then((a) =>
      nonceNs !== undefined && nonceNs < group.fence.fenceNs() ? FENCED : a,
    );
  }

  function groupNamed(home: string): RequestStateGroup {
    const group = deps.groups.get(home);
    if (group === undefined) throw new HomeUnreachableError(`home region ${home} is not listed under regions:`);
    return group;
  }

  /** A region's request-state Redis that did not answer, named (a move's warning says which). */
  async function inRegion<T>(home: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof StoreUnavailableError) || err instanceof HomeUnreachableError) throw err;
      throw new HomeUnreachableError(`region ${home}'s request-state Redis: ${err.message}`, { cause: err });
    }
  }

  /** Where a balance lives: the home its admits run at (effectiveHome), so a top-up races them on one Redis. */
  function groupOfCredits(target: CreditTarget): RequestStateGroup {
    const owner = target.owner === undefined ? undefined : deps.ownerHome(target.owner);
    const { home } = effectiveHome(
      { owner: target.owner, home: target.kind === 'key' ? target.home : undefined },
      owner,
      options.defaultHome,
    );
    return groupNamed(home);
  }

  return {
    admit(apiKey, nonce, ttlMs, charge, record, nonceNs) {
      const stale = deps.freshness.refusal();
      if (stale !== undefined) return Promise.reject(stale);
      let home;
      try {
        home =
          record === undefined
            ? { home: options.defaultHome, movedAtMs: 0 }
            : effectiveHome(
                record,
                record.owner === undefined ? undefined : deps.ownerHome(record.owner),
                options.defaultHome,
              );
      } catch (err) {
        // The owners table unknown for now (a failed read being retried): 503, as without regions.
        return Promise.reject(err instanceof Error ? err : new StoreUnavailableError(String(err)));
      }
      if (home.movedAtMs > 0 && nonceNs !== undefined) {
        if (
          nonceNs <=
          movedCutoffNs(
            home.movedAtMs,
            options.maxRecvWindowMs(),
            options.maxStalenessMs + (options.commitMarginMs ?? 0),
          )
        )
          return Promise.resolve(HOME_MOVED);
      }
      const group = deps.groups.get(home.home);
      // A home no longer listed (the map lost a region): nowhere to admit, so nothing is admitted.
      if (group === undefined)
        return Promise.reject(new HomeUnreachableError(`home region ${home.home} is not listed under regions:`));
      if (group === own) return admitAt(group, apiKey, nonce, ttlMs, charge, nonceNs);
      const started = performance.now();
      return admitAt(group, apiKey, nonce, ttlMs, charge, nonceNs).then(
        (a) => {
          deps.onRemoteAdmit?.(home.home, (performance.now() - started) / 1_000);
          return a;
        },
        (err: unknown) => {
          if (!(err instanceof StoreUnavailableError)) throw err;
          throw new HomeUnreachableError(`home region ${home.home}: ${err.message}`, { cause: err });
        },
      );
    },
    spendFailedAuth: (ipKey, limit) => own.state.spendFailedAuth(ipKey, limit),
    addCredits: (target, add) => groupOfCredits(target).state.addCredits(target, add),
    readCredits: (target) => groupOfCredits(target).state.readCredits(target),
    async moveCredits(holders, from, to) {
      const source = groupNamed(from);
      const target = groupNamed(to);
      if (source === target) return;
      // A page at a time, its reads (then its writes) sent together: one round trip each, however many keys.
      for (let i = 0; i < holders.length; i += MOVE_BATCH) {
        const page = holders.slice(i, i + MOVE_BATCH);
        const fields = await inRegion(from, () =>
          gatedByGroup(source, () => Promise.all(page.map((h) => source.state.readBalance(h)))),
        );
        await inRegion(to, () =>
          gatedByGroup(target, () => Promise.all(page.map((h, j) => target.state.writeBalance(h, fields[j])))),
        );
      }
    },
    countOutcome: (apiKey, owner, outcome) => own.state.countOutcome(apiKey, owner, outcome),
    getOutcomeUsage: async (subject) => mergeRings(await Promise.all(all.map((g) => g.state.getOutcomeUsage(subject)))),
    async getUsage(apiKey) {
      const each = await Promise.all(all.map((g) => g.state.getUsage(apiKey)));
      const perDay: Record<string, number> = {};
      const extra: Record<string, number> = {};
      let lastUsedAtMs: number | undefined;
      for (const u of each) {
        if (u.lastUsedAtMs !== undefined && (lastUsedAtMs === undefined || u.lastUsedAtMs > lastUsedAtMs))
          lastUsedAtMs = u.lastUsedAtMs;
        for (const [day, n] of Object.entries(u.perDay)) perDay[day] = (perDay[day] ?? 0) + n;
        for (const [day, n] of Object.entries(u.extraCostPerDay ?? {})) extra[day] = (extra[day] ?? 0) + n;
      }
      return { lastUsedAtMs, perDay, ...(Object.keys(extra).length > 0 && { extraCostPerDay: extra }) };
    },
    flushUsage: async () => {
      await Promise.all(all.map((g) => g.state.flushUsage()));
    },
    // After the commit; a region that does not answer keeps a harmless leftover (nothing reads it without the record).
    async drop(apiKeys) {
      const results = await Promise.allSettled(all.map((g) => g.state.drop(apiKeys)));
      for (const [i, r] of results.entries())
        if (r.status === 'rejected')
          deps.logger.warn({ region: all[i]?.name, err: (r.reason as Error).message }, 'deleted key state not dropped');
    },
    async close() {
      await Promise.all(all.map((g) => g.close()));
    },
  };
}
