// Tested in test/unit/audit-entry.test.ts.
/**
 * The audit entry: the one shape every reader of the audit stream shares (the audit API,
 * `keygate audit`, the console's key history and webhook delivery), and the one writer's builder.
 * The Redis store appends each entry as JSON in the field `entry` of the stream
 * `{prefix}{keystore}:audit`, in the same atomic step as the change it records; the memory store
 * keeps a bounded list of the same entries. An entry never holds a secret: only names of the
 * fields that changed, never their values.
 */

/** The actions an entry can record. Readers must pass an action they do not know through as it is. */
export const AUDIT_ACTIONS = [
  'create', // a key made (API, CLI, console)
  'create-replay', // a create retried with an Idempotency-Key already used: nothing changed
  'import', // a key added by `keygate keys import`
  'import-replace', // a key replaced by an import with --replace
  'update', // fields of a key changed (`changes` names them)
  'rotate', // a new credential; the previous secret valid until its grace ends
  'end-grace', // the previous secret's grace ended early (a leaked previous secret); the key stays
  'revoke', // the key can no longer be used (`reason` says why: the operator's words, or `leaked`)
  'delete', // the record is gone
  'reencrypt', // the key re-written as it is, its secrets sealed with the current encryption key
  'export', // keys read out by `keygate keys export`, without secrets (apiKey and id are `*`)
  'export-with-secrets', // the same, with secrets
  'owner-set', // an owner's own settings set or removed (apiKey and id are empty; `owner` names it)
  'credits-add', // credits topped up (`detail`: add=<n> remaining=<n>); an owner's names no key
  'credits-exhausted', // a key's (or, with no key named, an owner's) credits reached zero: actor `keygate`
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** The reason a leak report gives its revoke or its ended grace. */
export const LEAKED_REASON = 'leaked';

/** Who changed which key, how and when. Never a secret. */
export interface AuditEntry {
  /** ISO time of the change, on the clock of the instance that made it. */
  readonly at: string;
  /** The management token's name, the CLI's user, or `github-secret-scanning` for a leak report. */
  readonly actor: string;
  /** One of AUDIT_ACTIONS (a reader passes an unknown one through). */
  readonly action: string;
  /** The key ('' when the entry names no key: an owner's settings, an export). */
  readonly apiKey: string;
  /** The key's id ('' as apiKey). */
  readonly id: string;
  /** The key's owner, or the owner an `owner-set` changed. */
  readonly owner?: string;
  /** Names of the fields an `update` changed (never their values). */
  readonly changes?: readonly string[];
  /** Why: a revoke's or rotate's reason as the operator gave it, or `leaked`. */
  readonly reason?: string;
  /** Where a leaked secret was found (a leak report's `url`). */
  readonly url?: string;
  /** What found it (a leak report's `source`, e.g. `content`, `commit`, `gist`). */
  readonly source?: string;
  /** Anything else, in words (grace, alg, an owner's limit). */
  readonly detail?: string;
}

/** An entry with its place in the stream: the Redis stream id (`<ms>-<seq>`), also the paging cursor. */
export interface AuditRecord {
  readonly cursor: string;
  readonly entry: AuditEntry;
}

/** The stream's name in Redis (one hash tag with the key records, so a change and its entry are one script). */
export const auditStreamKey = (prefix: string): string => `${prefix}{keystore}:audit`;
/** The one field of each stream entry: the entry's JSON. */
export const AUDIT_STREAM_FIELD = 'entry';
/** How many entries the stream keeps (approximately: XADD MAXLEN ~). */
export const AUDIT_STREAM_MAX = 100_000;

/** The builder every writer uses, so the shape has one definition. */
export function auditEntry(
  at: number,
  actor: string,
  action: AuditAction,
  key: { readonly apiKey: string; readonly id: string; readonly owner?: string | undefined },
  extra: Omit<Partial<AuditEntry>, 'at' | 'actor' | 'action' | 'apiKey' | 'id'> = {},
): AuditEntry {
  const owner = extra.owner ?? key.owner;
  return {
    at: new Date(at).toISOString(),
    actor,
    action,
    apiKey: key.apiKey,
    id: key.id,
    ...(owner !== undefined && owner !== '' && { owner }),
    ...(extra.changes && extra.changes.length > 0 && { changes: [...extra.changes] }),
    ...(extra.reason !== undefined && extra.reason !== '' && { reason: extra.reason }),
    ...(extra.url !== undefined && { url: extra.url }),
    ...(extra.source !== undefined && { source: extra.source }),
    ...(extra.detail !== undefined && extra.detail !== '' && { detail: extra.detail }),
  };
}

const str = (v: unknown): v is string => typeof v === 'string';

/**
 * A stream entry's JSON as an AuditEntry, or undefined when it is not one. Only the known fields are
 * copied (whatever else the JSON holds never reaches a reader). Entries written before `owner`
 * and `reason` were fields carry them in `detail` (`owner=…`; a revoke's detail is its reason):
 * they are read into the fields, so every entry filters and reads alike.
 */
export function parseAuditEntry(json: string): AuditEntry | undefined {
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (!str(o.at) || !str(o.actor) || !str(o.action)) return undefined;
  const detail = str(o.detail) ? o.detail : undefined;
  let owner = str(o.owner) ? o.owner : undefined;
  if (owner === undefined && detail !== undefined) owner = /(?:^|; )owner=([^;]+)/.exec(detail)?.[1];
  let reason = str(o.reason) ? o.reason : undefined;
  if (reason === undefined && o.action === 'revoke' && detail !== undefined && !('reason' in o)) reason = detail;
  const changes =
    Array.isArray(o.changes) && o.changes.every(str)
      ? o.changes
      : o.action === 'update' && detail !== undefined
        ? detail.split(',').filter(Boolean)
        : undefined;
  return {
    at: o.at,
    actor: o.actor,
    action: o.action,
    apiKey: str(o.apiKey) ? o.apiKey : '',
    id: str(o.id) ? o.id : '',
    ...(owner !== undefined && { owner }),
    ...(changes && changes.length > 0 && { changes }),
    ...(reason !== undefined && { reason }),
    ...(str(o.url) && { url: o.url }),
    ...(str(o.source) && { source: o.source }),
    ...(detail !== undefined && { detail }),
  };
}

/** What a reader asks for; every given field must match. */
export interface AuditFilter {
  readonly apiKey?: string;
  readonly owner?: string;
  readonly action?: string;
  /** Epoch ms: entries at or after it. */
  readonly since?: number;
}

export function auditMatches(entry: AuditEntry, filter: AuditFilter): boolean {
  if (filter.apiKey !== undefined && entry.apiKey !== filter.apiKey) return false;
  if (filter.owner !== undefined && entry.owner !== filter.owner) return false;
  if (filter.action !== undefined && entry.action !== filter.action) return false;
  if (filter.since !== undefined && !(Date.parse(entry.at) >= filter.since)) return false;
  return true;
}

/** A stream id (`<ms>-<seq>`): what a cursor must look like before it reaches XRANGE. */
export const AUDIT_CURSOR = /^\d{1,16}-\d{1,16}$/;
