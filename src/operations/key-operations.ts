import { createHash, timingSafeEqual } from 'node:crypto';
import {
  newKey,
  revokeKey,
  rotateKey,
  updateKey,
  type CredentialInput,
  type KeyChanges,
  type NewKeyInput,
} from '../keys/key-changes.js';
import { keyStatus, type KeyRecord } from '../keys/key-record.js';
import type { KeyUsage } from '../keys/key-usage.js';
import { outcomeReport, type Granularity } from '../keys/outcome-usage.js';
import { hasUnprintable, PRINTABLE_RULE } from '../keys/printable-text.js';
import type { KeyClaim, KeyWriteResult } from '../store/key-write.js';
import type { AuditEntry, Store } from '../store/store.js';
import { createKeyCommits, refusedWrite } from './key-commits.js';
import { createKeyImport, IMPORT_BATCH, type KeyImport } from './key-import.js';
import { createKeyListing, type KeyFilter, type KeyPage, type PageRequest } from './key-listing.js';
import { carryCredits, CREDITS_NOT_CARRIED, keyHome, type HomeRules } from './homes.js';
import { conflict, done, invalid, notFound, type Done } from './outcome.js';
import type { AuditExtra } from './key-commits.js';
import { LEAKED_REASON } from '../store/audit-entry.js';
import { compileCredits, KEY_CREDITS_NAME, type CreditsView } from '../keys/credits.js';
import { checkTopUp, creditsView } from './credits-view.js';

/** Compares two secrets in time that does not depend on where they differ. */
const sameSecret = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** Sent with a create: a retried create with the same key (from the same actor) returns the first key. */
export interface Idempotency {
  readonly key: string;
  /** Anything that identifies the request body: the same key with another body is refused. */
  readonly body: string;
}

/** How long an Idempotency-Key is remembered. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

export interface KeyOperations extends KeyImport {
  get(apiKey: string): Promise<Done<KeyRecord>>;
  /** One page of the matching keys, in apiKey order, read from the store's indexes (only that page). */
  list(filter: KeyFilter, page: PageRequest): Promise<KeyPage>;
  /** Every matching key, page by page (the CLI's whole list, export, reseal). */
  listAll(filter: KeyFilter): AsyncGenerator<readonly KeyRecord[]>;
  create(
    input: NewKeyInput,
    actor: string,
    idempotency?: Idempotency,
  ): Promise<Done<{ record: KeyRecord; replayed: boolean }>>;
  update(apiKey: string, changes: KeyChanges, actor: string): Promise<Done<KeyRecord>>;
  rotate(
    apiKey: string,
    graceMs: number,
    actor: string,
    reason?: string,
    /** A new alg and public key (HS256 → EdDSA); without one, a new credential of the key's alg. */
    to?: CredentialInput,
  ): Promise<Done<{ record: KeyRecord; secret?: string; previousSecretValidUntil: string }>>;
  revoke(apiKey: string, reason: string | undefined, actor: string): Promise<Done<KeyRecord>>;
  /**
   * A secret reported found in public (a secret scanning report): the key's current secret revokes
   * the key (through the one revoke), a previous secret still in its grace ends that grace (the
   * current secret keeps working); both audited with reason `leaked`, the report's url and source.
   * `true_positive` when the secret could still admit a request, now or after a renewal (an expired key
   * too), else `false_positive` (unknown, revoked, out of grace).
   * Found by the secret's keyed fingerprint (Store.keyOfSecret), never by reading keys.
   */
  reportLeak(
    secret: string,
    where: { url?: string; source?: string },
    actor: string,
  ): Promise<{ label: 'true_positive' | 'false_positive'; apiKey?: string; action?: 'revoke' | 'end-grace' }>;
  remove(apiKey: string, actor: string): Promise<Done<KeyRecord>>;
  usage(apiKey: string): Promise<Done<{ record: KeyRecord; usage: KeyUsage }>>;
  /**
   * The key's usage by outcome at a granularity (keys/outcome-usage.ts): what `keygate keys usage
   * --granularity` prints and GET /v1/keys/{apiKey}/usage?granularity= returns.
   */
  outcomeUsage(apiKey: string, granularity: Granularity): Promise<Done<KeyOutcomeReport>>;
  /** The key's credits now (what is left, the next refill), read from the admit state; null when it has none. */
  credits(record: KeyRecord): Promise<CreditsView | null>;
  /**
   * Adds to the key's credits in one atomic step with its requests' spends (a top-up racing requests loses
   * nothing), audited; answers the balance after it. 409 when the key has no credits to add to.
   */
  addCredits(apiKey: string, add: unknown, actor: string): Promise<Done<CreditsView>>;
  /** The record parser's problems with a create, writing nothing (to list every problem of a request at once). */
  check(input: NewKeyInput): readonly string[];
  /** The same for an update of `record`. */
  checkUpdate(record: KeyRecord, changes: KeyChanges): readonly string[];
}

/** A key's usage by outcome, as reported. */
export type KeyOutcomeReport = { apiKey: string; id: string } & ReturnType<typeof outcomeReport>;

/**
 * The one code path for key changes, shared by `keygate keys` and the
 * management API: read the key with its version, check its state, apply the pure
 * change (keys/key-changes.ts), then commit it as a compare-and-set with its audit
 * entry (the store checks the version, keeps revocation final and ids unique, and
 * publishes the change, in one atomic step). A change that can be re-applied to a
 * fresh read (patch, revoke, delete) is retried when another change landed first;
 * a rotate is not (its caller must learn the chain moved on): 409 with the version.
 * Longer than 80 lines on purpose: one short closure per operation over the shared read, decide and
 * commit steps (`change`, `commit`, `entry`: key-commits.ts); paging is key-listing.ts, the operations over
 * many keys (import, reseal) key-import.ts.
 */
export function createKeyOperations(deps: {
  store: Store;
  now: () => number;
  audit: (entry: AuditEntry) => void;
  /** The prefix of the HS256 secrets create and rotate issue (KEYGATE_SECRET_PREFIX); default `kgs_`. */
  secretPrefix?: string | undefined;
  /** Keys per import step (default IMPORT_BATCH; tests use small ones). */
  importBatch?: number;
  /** Regions (homes.ts); undefined: off, and a `home` is refused. */
  regions?: HomeRules | undefined;
}): KeyOperations {
  const { store, now } = deps;
  const importBatch = deps.importBatch ?? IMPORT_BATCH;
  const commits = createKeyCommits(deps);
  const { entry, commit, change } = commits;
  const load = async (apiKey: string): Promise<Done<KeyRecord>> => {
    const r = await store.readKey(apiKey);
    return r ? done(r.record) : notFound;
  };

  const { list, listAll } = createKeyListing({ store, now });
  const { importKeys, reseal } = createKeyImport({ importBatch }, { store, commits, listAll });

  const after = (r: Done<{ after: KeyRecord | null }>): Done<KeyRecord> =>
    r.ok ? done(r.value.after as KeyRecord) : r;

  /** The one revoke: an operator's (CLI, API, console) and a leak report's alike. */
  const revokeWith = async (apiKey: string, reason: string | undefined, actor: string, extra?: AuditExtra) =>
    after(
      await change(apiKey, 'revoke', actor, true, (current) =>
        current.state === 'revoked'
          ? conflict('the key is already revoked')
          : done({
              next: revokeKey(current, reason, now()),
              ...((reason || extra) && { audit: { ...(reason && { reason }), ...extra } }),
            }),
      ),
    );

  async function writeNew(record: KeyRecord, actor: string, claim?: KeyClaim): Promise<KeyWriteResult> {
    // The alg is audited with the key it was made with; an HS256 key's entry reads as before.
    const audit = entry(record, 'create', actor, record.alg ? { detail: `alg=${record.alg}` } : undefined);
    return commit([{ apiKey: record.apiKey, expect: 0, next: record }], [audit], claim);
  }
  const created = (record: KeyRecord) => done({ record, replayed: false });

  /**
   * A create retried with an Idempotency-Key already used: the first answer again, but only while
   * it is still true. The key must be at the version the first create wrote (so its secret is the
   * one that create returned, never a later one); a key rotated, revoked, changed or deleted since
   * is 409 naming it. A replay changes nothing and is audited like a change.
   */
  async function replay(
    claimed: string,
    bodyHash: string,
    actor: string,
  ): Promise<Done<{ record: KeyRecord; replayed: boolean }>> {
    // "<version> <apiKey> <bodyHash> <id>" (key-write.ts claimedValue; an id may hold spaces).
    const [version = '', apiKey = '', hash = '', ...idParts] = claimed.split(' ');
    const id = idParts.join(' ');
    if (hash !== bodyHash) return conflict('this Idempotency-Key was used with a different request body');
    const named = `key ${apiKey} (id ${JSON.stringify(id)})`;
    const current = await store.readKey(apiKey);
    if (!current) return conflict(`${named}, made with this Idempotency-Key, no longer exists`, 0);
    if (current.version !== Number(version))
      return conflict(
        `${named}, made with this Idempotency-Key, changed since (now version ${current.version}): ` +
          'its first answer is no longer true and its secret is not shown again; read the key instead',
        current.version,
      );
    const audit = entry(current.record, 'create-replay', actor);
    await store.appendAudit(audit);
    deps.audit(audit);
    return done({ record: current.record, replayed: true });
  }

  return {
    get: load,
    check: (input) => newKey(input, now(), deps.secretPrefix).errors,
    checkUpdate: (record, changes) => updateKey(record, changes, now()).errors,
    list,
    listAll,
    async create(given, actor, idempotency) {
      const home = await keyHome(deps.regions, store, given.owner, given.home, true);
      if (home.problems.length > 0) return invalid(home.problems);
      const input = home.home === undefined ? given : { ...given, home: home.home };
      const { record, errors } = newKey(input, now(), deps.secretPrefix);
      if (!record) return invalid(errors);
      if (!idempotency) {
        const r = await writeNew(record, actor);
        return r.ok ? created(record) : refusedWrite(r);
      }
      // Per actor: another token's retry key never finds this key (or its secret).
      const name = `idempotency:${createHash('sha256').update(`${actor}\0${idempotency.key}`).digest('hex')}`;
      const bodyHash = createHash('sha256').update(idempotency.body).digest('hex');
      // The claim lands with the key in one atomic step, or not at all: a create that failed
      // (timeout, error) leaves nothing behind, and its retry creates the key (or, if the first
      // write landed after all, finds it here).
      const claim = { name, value: `${record.apiKey} ${bodyHash} ${record.id}`, ttlMs: IDEMPOTENCY_TTL_MS };
      const r = await writeNew(record, actor, claim);
      if (r.ok) return created(record);
      return r.conflict === 'claimed' ? replay(r.value, bodyHash, actor) : refusedWrite(r);
    },
    async update(apiKey, changes, actor) {
      let warning: string | undefined;
      if (changes.home !== undefined) {
        const current = await store.readKey(apiKey);
        if (current === null) return notFound;
        const { owner, home, credits, state } = current.record;
        const checked = await keyHome(deps.regions, store, owner, changes.home, false);
        if (checked.problems.length > 0) return invalid(checked.problems);
        // A move's balance goes first, then the move (none for a change that will be refused). A key with an owner
        // lives at its owner's home whatever its own `home` says: only its owner's move moves it (and its balance).
        const refused = state === 'revoked' || updateKey(current.record, changes, now()).errors.length > 0;
        if (deps.regions && owner === undefined && credits && !refused)
          warning = await carryCredits(store, [{ kind: 'key', apiKey, owner }], {
            from: home ?? deps.regions.defaultHome,
            to: changes.home,
            whose: `key ${apiKey}`,
          });
      }
      const r = await change(apiKey, 'update', actor, true, (current) => {
        if (current.state === 'revoked') return conflict('the key is revoked: a revoked key cannot be changed');
        const { record, errors } = updateKey(current, changes, now());
        if (!record) return invalid(errors);
        return done({
          next: record,
          audit: { changes: Object.keys(changes), ...(warning !== undefined && { detail: CREDITS_NOT_CARRIED }) },
        });
      });
      const updated = after(r);
      return updated.ok && warning !== undefined ? { ...updated, warnings: [warning] } : updated;
    },
    async rotate(apiKey, graceMs, actor, reason, to) {
      if (reason !== undefined && hasUnprintable(reason)) return invalid([`key.reason: ${PRINTABLE_RULE}`]);
      // One reading of the clock: the deadline returned is the one stored with the old secret.
      const t = now();
      let secret: string | undefined;
      const r = await change(apiKey, 'rotate', actor, false, (current) => {
        if (keyStatus(current, t) !== 'active') return conflict('only an active key can be rotated');
        const rotated = rotateKey(current, graceMs, t, to, deps.secretPrefix);
        if (rotated.errors.length > 0) return invalid(rotated.errors);
        secret = rotated.secret;
        // The reason is the operator's words, recorded as given (revoke keeps its reason the same way).
        // An alg change is audited as one: old -> new.
        const from = current.alg ?? 'HS256';
        const into = rotated.record.alg ?? 'HS256';
        const algNote = from !== into ? `; alg=${from}->${into}` : '';
        return done({
          next: rotated.record,
          audit: { detail: `grace=${graceMs}ms${algNote}`, ...(reason && { reason }) },
        });
      });
      if (!r.ok) return r;
      return done({
        record: r.value.after as KeyRecord,
        ...(secret !== undefined && { secret }),
        previousSecretValidUntil: new Date(t + graceMs).toISOString(),
      });
    },
    async revoke(apiKey, reason, actor) {
      // The reason is kept on the key (revokeReason) and printed by keys list: the record's text rule.
      if (reason !== undefined && hasUnprintable(reason)) return invalid([`key.reason: ${PRINTABLE_RULE}`]);
      return revokeWith(apiKey, reason, actor);
    },
    async reportLeak(secret, where, actor) {
      const negative = { label: 'false_positive' } as const;
      const apiKey = store.keyOfSecret ? await store.keyOfSecret(secret) : null;
      if (apiKey === null) return negative;
      const extra = { reason: LEAKED_REASON, ...where };
      const head = await store.readKey(apiKey);
      // Any key that can still admit the secret, now or once renewed (an expired key: a new expiresAt
      // brings it back), is acted on; only a revoked key is final.
      if (!head || head.record.state === 'revoked') return negative;
      if (head.record.secret !== undefined && sameSecret(head.record.secret, secret)) {
        const r = await revokeWith(apiKey, LEAKED_REASON, actor, extra);
        return r.ok ? { label: 'true_positive', apiKey, action: 'revoke' } : negative;
      }
      const r = await change(apiKey, 'end-grace', actor, true, (current) => {
        const previous = current.previousSecrets ?? [];
        const matches = (p: (typeof previous)[number]) => p.secret !== undefined && sameSecret(p.secret, secret);
        const live = previous.some((p) => matches(p) && Date.parse(p.validUntil) > now());
        if (current.state === 'revoked' || !live) return conflict('not a live previous secret of this key');
        const kept = previous.filter((p) => !matches(p));
        const { previousSecrets: _p, ...rest } = current;
        const next: KeyRecord = {
          ...rest,
          ...(kept.length > 0 && { previousSecrets: kept }),
          updatedAt: new Date(now()).toISOString(),
        };
        return done({ next, audit: extra });
      });
      return r.ok ? { label: 'true_positive', apiKey, action: 'end-grace' } : negative;
    },
    importKeys,
    reseal,
    async remove(apiKey, actor) {
      const r = await change(apiKey, 'delete', actor, true, () => done({ next: null }));
      return r.ok ? done(r.value.before) : r;
    },
    async credits(record) {
      if (!record.credits) return null;
      const spec = compileCredits(record.credits, KEY_CREDITS_NAME);
      const state = await store.readCredits({
        kind: 'key',
        apiKey: record.apiKey,
        owner: record.owner,
        home: record.home,
        spec,
      });
      return creditsView(record.credits, state, now());
    },
    async addCredits(apiKey, add, actor) {
      const problems: string[] = [];
      const amount = checkTopUp(add, problems);
      if (amount === undefined) return invalid(problems);
      const r = await load(apiKey);
      if (!r.ok) return r;
      const record = r.value;
      if (record.state === 'revoked') return conflict('the key is revoked: a revoked key cannot be changed');
      if (!record.credits) return conflict('the key has no credits: set them first (keys update --credits)');
      const spec = compileCredits(record.credits, KEY_CREDITS_NAME);
      const state = await store.addCredits(
        { kind: 'key', apiKey, owner: record.owner, home: record.home, spec },
        amount,
      );
      if (state === undefined) return invalid([`credits.add: would take the balance above ${Number.MAX_SAFE_INTEGER}`]);
      const audit = entry(record, 'credits-add', actor, { detail: `add=${amount} remaining=${state.remaining}` });
      await store.appendAudit(audit);
      deps.audit(audit);
      return done(creditsView(record.credits, state, now()));
    },
    async usage(apiKey) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      return done({ record: r.value, usage: await store.getUsage(apiKey) });
    },
    async outcomeUsage(apiKey, granularity) {
      const r = await load(apiKey);
      if (!r.ok) return r;
      const rings = await store.getOutcomeUsage({ apiKey });
      return done({ apiKey, id: r.value.id, ...outcomeReport(rings, granularity, now()) });
    },
  };
}
