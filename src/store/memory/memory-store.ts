// Tested in test/e2e/store-contract.test.ts (both stores), test/e2e/keys-file-reload.test.ts.
import type { Clock } from '../../clock.js';
import type { KeyRecord } from '../../keys/key-record.js';
import { createUtcDayOf, extraCostField, oldestKeptDay } from '../../keys/key-usage.js';
import type { OwnerRecord } from '../../keys/owner-record.js';
import { compileRateLimit, OWNER_POLICY_NAME, type CompiledLimit } from '../../policy/rate-limit-spec.js';
import { createKeyOrder, type KeyOrder } from './key-order.js';
import { createNonceTable } from './nonce-table.js';
import { checkKeyWrites, claimedValue, type KeyCommit, type KeyWriteResult } from '../key-write.js';
import { chargeBudgets, peekBudget, spendFailure, type Charge } from '../budgets.js';
import { createStagedKeySet, type StagedKeySet } from './staged-key-set.js';
import { ADMITTED, REPLAY, type KeyChangeListener, type Store } from '../store.js';

export interface MemoryStoreOptions {
  keys?: readonly KeyRecord[];
  /** Owners' own settings (the keys file's `owners:`). */
  owners?: readonly OwnerRecord[];
  /** How often expired nonces are swept, in ms. */
  sweepIntervalMs?: number;
}

/**
 * Embedded store: keys, the replay guard, rate-limit state and usage live in
 * this process only (usage is lost on restart). Node runs one callback at a
 * time, so admit() is atomic within the process; it is NOT shared between
 * processes (see KEYGATE_WORKERS). Same GCRA as the Redis script, on this
 * process's clock.
 */
export interface MemoryStore extends Store {
  /** Swaps the whole key set in one step and announces the keys whose record changed (see stageKeys). */
  replaceAll(records: readonly KeyRecord[], owners?: readonly OwnerRecord[]): void;
  /**
   * Starts a new key set built beside the live one (a keys file reloading in batches). After the
   * records are added and `scan()` has run, `commit()` puts it in force in one synchronous step
   * and announces only the keys that were added, changed or removed (or everything, past
   * ANNOUNCE_LIMIT), so a key cache keeps every unchanged entry. `abandon()` drops it.
   */
  stageKeys(): StagedKeys;
  nonceCount(): number;
}

export interface StagedKeys extends Pick<StagedKeySet, 'add' | 'scan'> {
  /** The owners' settings that go in force with the keys (the keys file's `owners:`; none when not called). */
  setOwners(owners: readonly OwnerRecord[]): void;
  commit(): void;
  abandon(): void;
}

/** Changed keys announced one by one after a swap; past this a single "everything changed" is cheaper. */
export const ANNOUNCE_LIMIT = 2_000;

/** A budget's name in the memory store: the key's own is its apiKey (as when a key had one budget); an owner's cannot clash with one. */
function budgetName(kind: 'key' | 'owner', apiKey: string, owner: string | undefined): string {
  return kind === 'key' ? apiKey : `\0owner\0${owner ?? ''}`;
}

export function createMemoryStore(options: MemoryStoreOptions, deps: { clock: Clock }): MemoryStore {
  let keys = new Map<string, KeyRecord>();
  let versions = new Map<string, number>(); // apiKey -> version; versions never repeat (see lastVersion)
  let ids = new Map<string, string>(); // id -> apiKey: an id names one key
  const staging = new Set<StagedKeySet>(); // key sets being built beside these (stageKeys)
  // The listing index: kept with every write; after a whole key set is swapped in, rebuilt by the next listing.
  let order: KeyOrder | undefined;
  let lastVersion = 0;
  const nonces = createNonceTable(); // the replay guard: (apiKey, nonce) -> expiry (ms), out of the JS heap
  const tats = new Map<string, number>(); // budget (budgetName) -> GCRA theoretical arrival time (µs)
  const ipTats = new Map<string, number>(); // client IP (or IPv6 /64) -> failed-auth GCRA TAT (µs)
  const usage = new Map<string, { lastUsedAtMs: number; perDay: Map<string, number> }>();
  const dayOf = createUtcDayOf(); // the day's name, rebuilt once a day, not per request
  const claims = new Map<string, { value: string; until: number }>(); // KeyCommit claims: name -> value, expiry (ms)
  const listeners = new Set<KeyChangeListener>();
  // Owners' own settings and their compiled limits: the request path reads `ownerLimit` per request.
  let owners = new Map<string, { record: OwnerRecord; limit: CompiledLimit | undefined }>();
  const ownerEntry = (record: OwnerRecord) => ({
    record,
    limit: record.rateLimit && compileRateLimit(record.rateLimit, OWNER_POLICY_NAME),
  });
  const ownersOf = (list: readonly OwnerRecord[]) => new Map(list.map((r) => [r.owner, ownerEntry(r)]));
  owners = ownersOf(options.owners ?? []);
  const emit = (apiKey: string | null) => {
    for (const l of listeners) l(apiKey);
  };

  const sweep = () => {
    const now = deps.clock.nowMs();
    nonces.sweep(now);
    // A TAT in the past means "full allowance", the same as none.
    const nowUs = now * 1_000;
    for (const [k, tat] of tats) if (tat <= nowUs) tats.delete(k);
    for (const [k, tat] of ipTats) if (tat <= nowUs) ipTats.delete(k);
  };
  const timer = setInterval(sweep, options.sweepIntervalMs ?? 10_000);
  timer.unref();

  /** Counts an admitted request and its cost beyond 1 in the day's extraCostField, as Redis keeps it. */
  function countUse(apiKey: string, now: number, cost: number) {
    let u = usage.get(apiKey);
    if (!u) usage.set(apiKey, (u = { lastUsedAtMs: now, perDay: new Map() }));
    u.lastUsedAtMs = now;
    const day = dayOf(now);
    const n = (u.perDay.get(day) ?? 0) + 1;
    u.perDay.set(day, n);
    if (cost > 1) u.perDay.set(extraCostField(day), (u.perDay.get(extraCostField(day)) ?? 0) + cost - 1);
    // The first request of a day drops the days that fell out of the kept range (as the Redis script does).
    if (n === 1) {
      const oldest = oldestKeptDay(now);
      for (const d of u.perDay.keys()) if ((d.startsWith('x:') ? d.slice(2) : d) < oldest) u.perDay.delete(d);
    }
  }

  /** The budgets' names in `tats` (a key's, its owner's) and the all-or-nothing decision over them (budgets.ts). */
  function chargeInMemory(apiKey: string, charge: Charge, nowUs: number) {
    const names = charge.budgets.map((b) => budgetName(b.kind, apiKey, charge.owner));
    const step = chargeBudgets(
      names.map((n) => tats.get(n) ?? 0),
      nowUs,
      charge.budgets.map((b) => b.limit),
      charge.cost,
    );
    return { ...step, names };
  }

  // One synchronous function, so the checks and the writes of a batch are one step (Node runs one callback at a time).
  function commit(change: KeyCommit): KeyWriteResult {
    const headOf = (apiKey: string) => {
      const r = keys.get(apiKey);
      return r && { version: versions.get(apiKey) ?? 0, id: r.id, state: r.state };
    };
    const t = Number(deps.clock.nowNs() / 1_000_000n);
    const claim = change.claim;
    const there = claim && claims.get(claim.name);
    if (claim && there && there.until > t)
      return { ok: false, conflict: 'claimed', name: claim.name, value: there.value };
    const conflict = checkKeyWrites(change.writes, headOf, (id) => ids.get(id));
    if (conflict) return { ok: false, ...conflict };
    const out: number[] = [];
    for (const w of change.writes) {
      const old = keys.get(w.apiKey);
      if (old && ids.get(old.id) === w.apiKey) ids.delete(old.id);
      if (old) order?.remove(w.apiKey, old.owner);
      if (w.next) order?.add(w.apiKey, w.next.owner);
      if (w.next) {
        keys.set(w.apiKey, w.next);
        versions.set(w.apiKey, ++lastVersion);
        ids.set(w.next.id, w.apiKey);
        out.push(lastVersion);
      } else {
        keys.delete(w.apiKey);
        versions.delete(w.apiKey);
        tats.delete(w.apiKey);
        usage.delete(w.apiKey);
        out.push(0);
      }
    }
    if (claim) {
      if (claims.size >= 10_000) for (const [k, c] of claims) if (c.until <= t) claims.delete(k);
      claims.set(claim.name, { value: claimedValue(out[0] ?? 0, claim.value), until: t + claim.ttlMs });
    }
    for (const w of change.writes) {
      for (const s of staging) s.touch(w.apiKey);
      emit(w.apiKey);
    }
    return { ok: true, versions: out };
  }
  const seed = (records: readonly KeyRecord[]) =>
    commit({ writes: records.map((r) => ({ apiKey: r.apiKey, next: r })), audit: [] });
  seed(options.keys ?? []);

  function stageKeys(): StagedKeys {
    const staged = createStagedKeySet(keys, ANNOUNCE_LIMIT, {
      versionOf: (apiKey) => versions.get(apiKey),
      fresh: () => ++lastVersion,
    });
    staging.add(staged);
    let nextOwners = owners;
    return {
      add: staged.add,
      scan: staged.scan,
      setOwners: (list) => void (nextOwners = ownersOf(list)),
      commit() {
        staging.delete(staged);
        // In the same synchronous step as the keys: no request sees new keys with old owner limits.
        owners = nextOwners;
        for (const apiKey of staged.touched)
          if (staged.next.has(apiKey)) staged.nextVersions.set(apiKey, ++lastVersion);
        keys = staged.next;
        order = undefined;
        versions = staged.nextVersions;
        ids = staged.nextIds;
        const changed = staged.changed();
        if (changed === null) emit(null);
        else for (const apiKey of changed) emit(apiKey);
      },
      abandon: () => void staging.delete(staged),
    };
  }

  return {
    kind: 'memory',
    async getKey(apiKey) {
      return keys.get(apiKey) ?? null;
    },
    // Nonces are kept by apiKey alone, whatever the owner: a re-created key keeps them.
    deletedOwner: async () => undefined,
    async readKey(apiKey) {
      const record = keys.get(apiKey);
      return record ? { record, version: versions.get(apiKey) ?? 0 } : null;
    },
    async listKeys({ owner, after, limit }) {
      order ??= createKeyOrder(keys.values());
      const { apiKeys, more } = order.page(owner, after, limit);
      return { records: apiKeys.map((k) => keys.get(k) as KeyRecord), more };
    },
    async commitKeyChanges(change) {
      return commit(change);
    },
    async putKey(record) {
      seed([record]);
    },
    async deleteKey(apiKey) {
      const existed = keys.has(apiKey);
      commit({ writes: [{ apiKey, next: null }], audit: [] });
      return existed;
    },
    // Synchronous: the embedded store's answer is known at once, so the request path needs no promise for it.
    admit(apiKey, nonce, ttlMs, charge) {
      const nowNs = deps.clock.nowNs();
      const now = Number(nowNs / 1_000_000n);
      const step =
        charge && charge.budgets.length > 0 ? chargeInMemory(apiKey, charge, Number(nowNs / 1_000n)) : undefined;
      if (step && !step.allowed) {
        step.clampedUs.forEach((tat, i) => tat !== undefined && tats.set(step.names[i] as string, tat));
        return { outcome: 'limited', refusedBy: step.refusedBy, rate: step.states };
      }
      if (!nonces.admitOnce(apiKey, nonce, ttlMs, now)) return REPLAY;
      if (step) step.names.forEach((name, i) => tats.set(name, step.tatsUs[i] as number));
      countUse(apiKey, now, charge?.cost ?? 1);
      return step ? { outcome: 'admitted', rate: step.states } : ADMITTED;
    },
    async spendFailedAuth(ipKey, limit) {
      const step = spendFailure(ipTats.get(ipKey) ?? 0, Number(deps.clock.nowNs() / 1_000n), limit);
      if (step.tatUs !== undefined) ipTats.set(ipKey, step.tatUs);
      return step.blockedUs;
    },
    async getUsage(apiKey) {
      const u = usage.get(apiKey);
      const perDay: Record<string, number> = {};
      const extraCostPerDay: Record<string, number> = {};
      for (const [d, n] of u?.perDay ?? []) {
        if (d.startsWith('x:')) extraCostPerDay[d.slice(2)] = n;
        else perDay[d] = n;
      }
      const extra = Object.keys(extraCostPerDay).length > 0;
      return { lastUsedAtMs: u?.lastUsedAtMs, perDay, ...(extra && { extraCostPerDay }) };
    },
    async flushUsage() {}, // counted exactly at admission: nothing pending
    // Changes are emitted synchronously in this process: none can be missed.
    subscribed: () => true,
    onKeyChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async readOwner(owner) {
      return owners.get(owner)?.record ?? null;
    },
    async listOwners() {
      return [...owners.values()]
        .map((e) => e.record)
        .sort((a, b) => (a.owner < b.owner ? -1 : a.owner > b.owner ? 1 : 0));
    },
    async putOwner(record) {
      if (record.rateLimit === undefined && record.home === undefined) owners.delete(record.owner);
      else owners.set(record.owner, ownerEntry(record));
    },
    ownerLimit: (owner) => owners.get(owner)?.limit,
    async ownerBudget(owner, limit) {
      const nowUs = Number(deps.clock.nowNs() / 1_000n);
      return peekBudget(tats.get(budgetName('owner', '', owner)) ?? 0, nowUs, limit);
    },
    // No audit log in memory: operators change keys only in Redis (management writes answer
    // writes_need_redis, `keygate keys` needs Redis); the embedded store's keys come from the keys
    // file, whose history is the operator's own (version control). GET /v1/audit answers 501.
    async appendAudit() {},
    async readAudit() {
      return { records: [] };
    },
    async ping() {},
    async countKeys() {
      return keys.size;
    },
    async close() {
      clearInterval(timer);
      listeners.clear();
    },
    replaceAll(records, ownerList) {
      const staged = stageKeys();
      staged.add(records);
      staged.setOwners(ownerList ?? [...owners.values()].map((e) => e.record));
      void staged.scan(true);
      staged.commit();
    },
    stageKeys,
    nonceCount() {
      return nonces.size();
    },
  };
}
