// Tested in test/unit/key-operations.test.ts, test/e2e/key-races.test.ts.
import type { KeyRecord } from '../keys/key-record.js';
import type { KeyClaim, KeyWrite, KeyWriteResult } from '../store/key-write.js';
import type { AuditEntry, KeyRecordStore } from '../store/store.js';
import { conflict, done, notFound, type Done, type Refusal } from './outcome.js';
import { auditEntry, type AuditAction } from '../store/audit-entry.js';

/** What an entry says beyond who, what and which key (its owner comes from the key). */
export type AuditExtra = Parameters<typeof auditEntry>[4];

/** A refused compare-and-set in words: what the operator sees (409 / exit 1). */
export function refusedWrite(r: Exclude<KeyWriteResult, { ok: true }>): Refusal {
  if (r.conflict === 'claimed') return conflict('this Idempotency-Key was already used');
  if (r.conflict === 'id_taken')
    return conflict(`id ${JSON.stringify(r.id)} is already the id of key ${r.holder}: an id names one key`);
  // The holder is not named: that would tell the caller another key's secret.
  if (r.conflict === 'secret_taken')
    return conflict(`key ${r.apiKey}: another key already holds its secret: a secret names one key`);
  if (r.conflict === 'revoked')
    return conflict(`key ${r.apiKey} is revoked: a revoked key cannot be changed back`, r.version);
  return conflict(
    `key ${r.apiKey} changed while this change was made (now version ${r.version}): read it and retry`,
    r.version,
  );
}

/** How many times a change that may be re-applied (patch, revoke, delete) is retried on a fresh read. */
const RETRIES = 8;

/** The steps every key change is made of, shared by the key operations and the import. */
export interface KeyCommits {
  /** The audit entry of a change to `r`, at the clock's now (store/audit-entry.ts: the one shape). */
  entry(
    r: Pick<KeyRecord, 'apiKey' | 'id' | 'owner'>,
    action: AuditAction,
    actor: string,
    extra?: AuditExtra,
  ): AuditEntry;
  /** Commits writes with their audit entries; the log lines follow only a commit that happened. */
  commit(writes: KeyWrite[], audit: AuditEntry[], claim?: KeyClaim): Promise<KeyWriteResult>;
  /** Read, decide, compare-and-set; `retry` re-reads and decides again when another change landed first. */
  change(
    apiKey: string,
    action: AuditAction,
    actor: string,
    retry: boolean,
    decide: (current: KeyRecord) => Done<{ next: KeyRecord | null; audit?: AuditExtra }>,
  ): Promise<Done<{ before: KeyRecord; after: KeyRecord | null }>>;
}

/**
 * Read the key with its version, decide the change, commit it as a compare-and-set with its audit entry
 * (the store checks the version, keeps revocation final and ids unique, and publishes the change, in one
 * atomic step). A change that can be re-applied to a fresh read is retried when another landed first.
 */
export function createKeyCommits(deps: {
  store: Pick<KeyRecordStore, 'readKey' | 'commitKeyChanges'>;
  now: () => number;
  audit: (entry: AuditEntry) => void;
}): KeyCommits {
  const { store, now } = deps;
  const entry = (
    r: Pick<KeyRecord, 'apiKey' | 'id' | 'owner'>,
    action: AuditAction,
    actor: string,
    extra?: AuditExtra,
  ): AuditEntry => auditEntry(now(), actor, action, r, extra);
  /** Commits writes with their audit entries; the log lines follow only a commit that happened. */
  const commit = async (writes: KeyWrite[], audit: AuditEntry[], claim?: KeyClaim) => {
    const result = await store.commitKeyChanges({ writes, audit, ...(claim && { claim }) });
    if (result.ok) for (const a of audit) deps.audit(a);
    return result;
  };
  /** Read, decide, compare-and-set; `retry` re-reads and decides again when another change landed first. */
  async function change(
    apiKey: string,
    action: AuditAction,
    actor: string,
    retry: boolean,
    decide: (current: KeyRecord) => Done<{ next: KeyRecord | null; audit?: AuditExtra }>,
  ): Promise<Done<{ before: KeyRecord; after: KeyRecord | null }>> {
    for (let attempt = 0; ; attempt++) {
      const current = await store.readKey(apiKey);
      if (!current) return notFound;
      const d = decide(current.record);
      if (!d.ok) return d;
      const audit = entry(d.value.next ?? current.record, action, actor, d.value.audit);
      const result = await commit([{ apiKey, expect: current.version, next: d.value.next }], [audit]);
      if (result.ok) return done({ before: current.record, after: d.value.next });
      if (result.conflict === 'version' && result.version === 0) return notFound;
      if (result.conflict !== 'version' || !retry || attempt + 1 >= RETRIES) return refusedWrite(result);
    }
  }
  return { entry, commit, change };
}
