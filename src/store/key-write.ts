// Tested in test/e2e/store-contract.test.ts (both stores), test/unit/key-operations.test.ts.
import { secretsOf, type KeyRecord } from '../keys/key-record.js';
import type { AuditEntry } from './audit-entry.js';

export type { AuditEntry } from './audit-entry.js';

/**
 * One key change as a compare-and-set: applied only if the key is still at
 * `expect`, the version the caller read (0 = the key must not exist).
 * `next` null deletes the key. `expect` undefined writes unconditionally: only
 * for seeding a store (tests, the embedded keys file), never for an operator's change.
 */
export interface KeyWrite {
  readonly apiKey: string;
  readonly expect?: number;
  readonly next: KeyRecord | null;
}

/**
 * Why a batch of writes was refused (nothing of it was written):
 *   version  — the key changed since it was read (`version` is its current one, 0 = gone);
 *   revoked  — the key is revoked and the write would make it usable again (revocation wins);
 *   id_taken — another key (`holder`) already has the record's id;
 *   secret_taken — another key already holds one of the record's secrets (a secret names one key, so a
 *              leak report finds every key it admits; `holder` is never shown to a caller);
 *   claimed  — the commit's claim name is already set (`value` is what it holds, see KeyClaim).
 */
export type KeyWriteConflict =
  | { readonly conflict: 'version' | 'revoked'; readonly apiKey: string; readonly version: number }
  | { readonly conflict: 'id_taken'; readonly apiKey: string; readonly id: string; readonly holder: string }
  | { readonly conflict: 'secret_taken'; readonly apiKey: string; readonly holder: string }
  | { readonly conflict: 'claimed'; readonly name: string; readonly value: string };

/** A batch is all or nothing: every write's new version, or the first conflict found. */
export type KeyWriteResult =
  { readonly ok: true; readonly versions: readonly number[] } | ({ readonly ok: false } & KeyWriteConflict);

/** What the checks need to know of a key as it stands. */
export interface KeyHead {
  readonly version: number;
  readonly id: string;
  readonly state: KeyRecord['state'];
  /** The secrets the key holds (keys/key-record.ts secretsOf); the Redis script reads their fingerprints. */
  readonly secrets: readonly string[];
}

/** A record with the version it was read at: what a compare-and-set starts from. */
export interface VersionedKey {
  readonly record: KeyRecord;
  readonly version: number;
}

/**
 * A name set in the same atomic step as the writes, and only if it is not set yet (a management
 * Idempotency-Key): a set name refuses the whole commit (`claimed`). Stored as
 * "<version of the first write> <value>", kept `ttlMs`. Because the claim and the key land
 * together or not at all, a create that failed (timeout, error, refusal) leaves no claim behind,
 * and a claim always names a key that was written, at the version it was written at.
 */
export interface KeyClaim {
  /** The name without the store's prefix, e.g. `idempotency:<sha256>`. */
  readonly name: string;
  readonly value: string;
  readonly ttlMs: number;
}

/** A batch of writes and the audit entries committed with it. */
export interface KeyCommit {
  readonly writes: readonly KeyWrite[];
  readonly audit: readonly AuditEntry[];
  readonly claim?: KeyClaim;
}

/** What a claim holds once committed: the version its key was written at, then the caller's value. */
export const claimedValue = (version: number, value: string) => `${version} ${value}`;

/**
 * The checks of a batch, before anything is written: the same rules, in the same
 * order, as the Redis script (key-change-script.ts), so both stores decide alike
 * (the race tests run against both). `headOf` is the key's current head,
 * `holderOf` the apiKey holding an id, `secretHolderOf` the apiKey holding a secret.
 */
export function checkKeyWrites(
  writes: readonly KeyWrite[],
  headOf: (apiKey: string) => KeyHead | undefined,
  holderOf: (id: string) => string | undefined,
  secretHolderOf: (secret: string) => string | undefined,
): KeyWriteConflict | undefined {
  const claimed = new Map<string, string>(); // ids taken by this batch → apiKey
  const freed = new Set<string>(); // ids this batch moves away from or deletes
  const claimedSecrets = new Map<string, string>(); // secrets taken by this batch → apiKey
  const freedSecrets = new Set<string>(); // secrets held by a key this batch rewrites or deletes
  for (const w of writes) {
    const head = headOf(w.apiKey);
    if (head && (w.next === null || w.next.id !== head.id)) freed.add(head.id);
    if (head) for (const s of head.secrets) freedSecrets.add(s);
  }
  for (const w of writes) {
    const head = headOf(w.apiKey);
    const version = head?.version ?? 0;
    if (w.expect !== undefined) {
      if (w.expect !== version) return { conflict: 'version', apiKey: w.apiKey, version };
      if (w.next && head?.state === 'revoked' && w.next.state !== 'revoked')
        return { conflict: 'revoked', apiKey: w.apiKey, version };
    }
    if (!w.next || w.expect === undefined) continue;
    const id = w.next.id;
    const holder = claimed.get(id) ?? (freed.has(id) ? undefined : holderOf(id));
    if (holder !== undefined && holder !== w.apiKey) return { conflict: 'id_taken', apiKey: w.apiKey, id, holder };
    claimed.set(id, w.apiKey);
    // Only a secret the key does not hold yet is checked, so keys that shared one before can still be
    // changed and revoked.
    const own = new Set(head?.secrets);
    for (const secret of secretsOf(w.next)) {
      const has =
        claimedSecrets.get(secret) ??
        (own.has(secret) ? w.apiKey : freedSecrets.has(secret) ? undefined : secretHolderOf(secret));
      if (has !== undefined && has !== w.apiKey) return { conflict: 'secret_taken', apiKey: w.apiKey, holder: has };
      claimedSecrets.set(secret, w.apiKey);
    }
  }
  return undefined;
}
