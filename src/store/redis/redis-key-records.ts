// Tested in test/e2e/redis-store.test.ts, test/e2e/store-contract.test.ts, test/e2e/secret-cipher.test.ts.
import type { Logger } from 'pino';
import { parseKeyRecord, toExternal, type KeyRecord } from '../../keys/key-record.js';
import { secretFingerprints } from '../../keys/secret-fingerprint.js';
import { openExternal, SecretCipherError, type SecretCipher } from '../../keys/secret-cipher.js';
import { KEY_CHANGE_SCRIPT } from './scripts/key-change-script.js';
import { AUDIT_APPEND_SCRIPT } from '../webhook-queue.js';
import {
  AUDIT_STREAM_FIELD,
  AUDIT_STREAM_MAX,
  auditStreamKey,
  parseAuditEntry,
  type AuditRecord,
} from '../audit-entry.js';
import type { AuditRange } from '../store.js';
import type { AuditEntry, KeyCommit, KeyWriteResult, VersionedKey } from '../key-write.js';
import type { RedisClient } from './connection/redis-connection.js';
import { DELETED_OWNER_KEPT_MS, StoreUnavailableError, type KeyPage, type KeyPageQuery } from '../store.js';

/**
 * The key records in Redis: every name of the management state carries the one
 * hash tag `{keystore}`, so a change, its indexes, its change message and its audit
 * entry are one atomic script even on a Cluster (key-change-script.ts):
 *   {prefix}{keystore}:key:<apiKey>    hash: v (version), json (the record, secrets sealed if on), id, owner, state
 *   {prefix}{keystore}:index           sorted set of every apiKey (score 0: ordered by apiKey)
 *   {prefix}{keystore}:owner:<owner>   sorted set of that owner's apiKeys (score 0)
 * The sorted sets are the listing: a page is one ZRANGEBYLEX after the cursor's apiKey, then one
 * HGET per key of the page (listKeys), whatever the number of keys.
 *   {prefix}{keystore}:ids             hash: id → apiKey (an id names one key)
 *   {prefix}{keystore}:deleted:<apiKey>  the owner a deleted key had ('' for none), kept DELETED_OWNER_KEPT_MS
 *   {prefix}{keystore}:version         counter: versions never repeat, even after a delete and a re-import
 *   {prefix}{keystore}:audit           stream of key changes (who/what/when, never a secret)
 *   {prefix}{keystore}:idempotency:<sha256>  a management Idempotency-Key (per token), set with the key it
 *                                      created: "<version> <apiKey> <bodyHash> <id>", 24 h (key-write.ts KeyClaim)
 * The cost: on a Cluster every record lives on one node (the request path reads a
 * record only on a key-cache miss; nonces, GCRA state and usage stay spread by {apiKey}).
 *
 * In the first layout, records were {prefix}key:<apiKey> (JSON) listed in the set {prefix}keys:
 * migrateLegacy() moves them into this layout (see docs/redis.md "Redis layout").
 */
export interface RedisKeyRecords {
  getKey(apiKey: string): Promise<KeyRecord | null>;
  readKey(apiKey: string): Promise<VersionedKey | null>;
  deletedOwner(apiKey: string): Promise<string | undefined>;
  listKeys(query: KeyPageQuery): Promise<KeyPage>;
  countKeys(): Promise<number>;
  /** Up to `count` apiKeys of the index after `after` (exclusive; from the first when undefined), in order. */
  namesAfter(after: string | undefined, count: number): Promise<string[]>;
  /** The one commit point of every key change (and of its durability wait). */
  commitKeyChange(commit: KeyCommit): Promise<KeyWriteResult>;
  appendAudit(entry: AuditEntry): Promise<void>;
  /** The apiKey whose record holds this secret (current or in its grace), by its fingerprint; null if none. */
  keyOfSecret(secret: string): Promise<string | null>;
  /** The audit stream from a cursor or a time (XRANGE, exclusive start after a cursor), oldest first. */
  readAudit(range: AuditRange): Promise<{ records: AuditRecord[]; last?: string }>;
  /** Moves records of the first layout into this one; returns how many moved. */
  migrateLegacy(): Promise<number>;
}

export function createRedisKeyRecords(
  options: { prefix: string; channel: string; cipher?: SecretCipher; auditStreamMax?: number },
  deps: { client: RedisClient; logger: Logger },
): RedisKeyRecords {
  const { client, logger } = deps;
  const { prefix, channel, cipher } = options;
  const auditMax = String(options.auditStreamMax ?? AUDIT_STREAM_MAX);
  const base = `${prefix}{keystore}:`;
  const recordOf = (apiKey: string) => `${base}key:${apiKey}`;
  const index = `${base}index`;
  client.defineCommand('keygateKeyChange', { lua: KEY_CHANGE_SCRIPT });
  client.defineCommand('keygateAuditAppend', { numberOfKeys: 1, lua: AUDIT_APPEND_SCRIPT });
  // KEYS and ARGV go as two arrays, never spread into the call: a commit's arguments grow with its
  // writes (7 per key), and ioredis flattens one level of arrays into the command itself.
  const script = (
    client as unknown as { keygateKeyChange(numKeys: number, keys: string[], args: string[]): Promise<unknown[]> }
  ).keygateKeyChange.bind(client);

  function decode(apiKey: string, raw: string | null | undefined): KeyRecord | null {
    if (raw === null || raw === undefined) return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      logger.error({ apiKeyPrefix: apiKey.slice(0, 6) }, 'corrupt key record in redis (bad JSON); treating as unknown');
      return null;
    }
    let opened: Record<string, unknown>;
    try {
      opened = openExternal(parsed as Record<string, unknown>, cipher);
    } catch (err) {
      // A secret we cannot open is a server configuration problem, not an unknown key: fail closed with 503.
      if (err instanceof SecretCipherError) throw new StoreUnavailableError(`cannot open key secret: ${err.message}`);
      throw err;
    }
    const { record, errors } = parseKeyRecord(opened, 'redis key', true);
    if (!record) {
      logger.error({ errors }, 'invalid key record in redis; treating as unknown');
      return null;
    }
    return record;
  }

  const fingerprints = `${base}fingerprints`;
  /**
   * The current key's fingerprint of every secret the record holds (its own and those still in their
   * grace): a revoked key keeps them, so a report of its secret is answered, never acted on twice.
   */
  const fingerprintsOf = (record: KeyRecord) =>
    [record.secret, ...(record.previousSecrets ?? []).map((p) => p.secret)]
      .flatMap((s) => (s === undefined ? [] : [secretFingerprints(s, cipher)[0] as string]))
      .join(' ');
  const seal = (record: KeyRecord) =>
    JSON.stringify(toExternal(record, cipher && ((secret) => cipher.seal(secret, record.id))));

  async function commitKeyChange(commit: KeyCommit): Promise<KeyWriteResult> {
    const keys = [
      index,
      `${base}ids`,
      `${base}version`,
      `${base}audit`,
      ...commit.writes.map((w) => recordOf(w.apiKey)),
      fingerprints,
      ...(commit.claim ? [`${base}${commit.claim.name}`] : []),
    ];
    const args: string[] = [`${base}owner:`, channel, String(commit.writes.length), String(commit.audit.length)];
    for (const w of commit.writes) {
      const r = w.next;
      args.push(w.apiKey, w.expect === undefined ? '' : String(w.expect), r ? 'put' : 'del');
      args.push(r ? seal(r) : '', r?.id ?? '', r?.owner ?? '', r?.state ?? '', r ? fingerprintsOf(r) : '');
    }
    for (const a of commit.audit) args.push(JSON.stringify(a));
    args.push(String(DELETED_OWNER_KEPT_MS));
    if (commit.claim) args.push(commit.claim.value, String(commit.claim.ttlMs));
    args.push(auditMax);
    const reply = await script(keys.length, keys, args);
    return toResult(reply, commit.claim?.name);
  }

  return {
    getKey: async (apiKey) => decode(apiKey, await client.hget(recordOf(apiKey), 'json')),
    async deletedOwner(apiKey) {
      const owner = await client.get(`${base}deleted:${apiKey}`);
      return owner === null ? undefined : owner;
    },
    async readKey(apiKey) {
      const [json, v] = await client.hmget(recordOf(apiKey), 'json', 'v');
      const record = decode(apiKey, json);
      return record ? { record, version: Number(v) } : null;
    },
    async listKeys({ owner, after, limit }) {
      // One more name than the page, to know whether another page follows. Every score is 0, so the
      // lexicographic range is exact ('(' = after, exclusive; the cursor's key need not exist any more).
      const set = owner === undefined ? index : `${base}owner:${owner}`;
      const names = await client.zrangebylex(set, after === undefined ? '-' : `(${after}`, '+', 'LIMIT', 0, limit + 1);
      const page = names.slice(0, limit);
      // All HGETs at once: auto-pipelining sends them in one batch. A key deleted in between is left out.
      const raws = await Promise.all(page.map((name) => client.hget(recordOf(name), 'json')));
      return { records: page.flatMap((name, i) => decode(name, raws[i]) ?? []), more: names.length > limit };
    },
    countKeys: () => client.zcard(index),
    // Every score is 0, so the index orders by name and a lexical range pages through it.
    namesAfter: (after, count) =>
      client.zrangebylex(index, after === undefined ? '-' : `(${after}`, '+', 'LIMIT', 0, count),
    commitKeyChange,
    async appendAudit(entry) {
      // The same trim as a key change's: never past what the webhooks' consumer group has not finished.
      await (
        client as unknown as { keygateAuditAppend(stream: string, json: string, max: string): Promise<unknown> }
      ).keygateAuditAppend(auditStreamKey(prefix), JSON.stringify(entry), auditMax);
    },
    async keyOfSecret(secret) {
      // Every key the fingerprint may have been written with (an encryption key being changed).
      for (const fp of secretFingerprints(secret, cipher)) {
        const apiKey = await client.hget(fingerprints, fp);
        if (apiKey !== null) return apiKey;
      }
      return null;
    },
    async readAudit(range) {
      // The stream name carries the {keystore} tag: on a Cluster it is read from the node holding that slot.
      const start =
        range.after !== undefined ? `(${range.after}` : range.sinceMs !== undefined ? `${range.sinceMs}-0` : '-';
      const rows = await client.xrange(auditStreamKey(prefix), start, '+', 'COUNT', range.count);
      const records: AuditRecord[] = [];
      for (const [cursor, fields] of rows) {
        const i = fields.indexOf(AUDIT_STREAM_FIELD);
        const entry = i >= 0 && i % 2 === 0 ? parseAuditEntry(fields[i + 1] ?? '') : undefined;
        if (entry) records.push({ cursor, entry });
      }
      const last = rows.at(-1)?.[0];
      return { records, ...(last !== undefined && { last }) };
    },
    async migrateLegacy() {
      const legacySet = `${prefix}keys`;
      let moved = 0;
      for (const apiKey of await client.smembers(legacySet)) {
        const legacyRecord = `${prefix}key:${apiKey}`;
        const raw = await client.get(legacyRecord);
        const head = raw === null ? undefined : legacyHead(raw);
        if (head) {
          // Copied as stored (sealed secrets stay sealed); a key already in the new layout wins.
          const keys = [index, `${base}ids`, `${base}version`, `${base}audit`, recordOf(apiKey), fingerprints];
          const args = [
            `${base}owner:`,
            channel,
            '1',
            '0',
            apiKey,
            '0',
            'put',
            raw as string,
            head.id,
            head.owner,
            head.state,
            // Its secrets are indexed when it is next written (a change, or keygate keys reencrypt).
            '',
            String(DELETED_OWNER_KEPT_MS),
            auditMax,
          ];
          const reply = await script(keys.length, keys, args);
          const result = toResult(reply);
          if (result.ok) moved++;
          else logger.warn({ apiKeyPrefix: apiKey.slice(0, 6), conflict: result.conflict }, 'legacy key not moved');
        }
        await client.del(legacyRecord);
        await client.srem(legacySet, apiKey);
      }
      if (moved > 0) logger.info({ moved }, 'moved key records to the {keystore} layout');
      return moved;
    },
  };
}

function legacyHead(raw: string): { id: string; owner: string; state: string } | undefined {
  try {
    const o = JSON.parse(raw) as { id?: unknown; apiKey?: unknown; owner?: unknown; state?: unknown };
    const id = typeof o.id === 'string' ? o.id : typeof o.apiKey === 'string' ? o.apiKey : undefined;
    if (id === undefined) return undefined;
    return {
      id,
      owner: typeof o.owner === 'string' ? o.owner : '',
      state: o.state === 'revoked' ? 'revoked' : 'active',
    };
  } catch {
    return undefined;
  }
}

function toResult(reply: unknown[], name = ''): KeyWriteResult {
  const [tag, apiKey, version, id, holder] = reply.map(String);
  if (tag === 'ok') return { ok: true, versions: reply.slice(1).map(Number) };
  if (tag === 'claimed') return { ok: false, conflict: 'claimed', name, value: apiKey as string };
  if (tag === 'id_taken')
    return { ok: false, conflict: 'id_taken', apiKey: apiKey as string, id: id as string, holder: holder as string };
  if (tag === 'secret_taken')
    return { ok: false, conflict: 'secret_taken', apiKey: apiKey as string, holder: holder as string };
  if (tag === 'version' || tag === 'revoked')
    return { ok: false, conflict: tag, apiKey: apiKey as string, version: Number(version) };
  throw new Error(`key change script: unexpected reply ${String(tag)}`);
}
