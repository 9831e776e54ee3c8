import { readDataFile } from '../files/read-data-file.js';
import { withSchemaProblems } from '../files/schema.js';
import { createListSharing, parseKeyRecord, type KeyRecord } from './key-record.js';
import { parseOwnersMap, type OwnerRecord } from './owner-record.js';

export class KeysFileError extends Error {
  override readonly name = 'KeysFileError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid keys file:\n  - ${problems.join('\n  - ')}`);
  }
}

/**
 * Reads the embedded mode's keys file (JSON or YAML):
 *   keys:
 *     - apiKey: ...      # the JWT sub
 *       apiSecret: ...   # plain string, at least 16 bytes
 *       id: ...          # sent upstream as X-Api-Key-Id (defaults to apiKey)
 *       owner: ...       # optional: the service's account id, sent upstream as X-Api-Key-Owner
 *       scopes: [accounts:read]
 *       allowIps: [10.0.0.0/8]
 *       state: active | revoked
 *       rateLimit: { rate: 100/s, burst: 200 }   # optional; /s, /m or /h; burst defaults to the count
 *       binding: required   # optional (default off): every token must name its request
 *   owners:              # optional: an owner's own budget, shared by all its keys
 *     acct-1: { rateLimit: { rate: 12/h, burst: 12 } }
 * Throws KeysFileError listing every problem.
 */
export function parseKeysDocument(data: unknown, file: string): KeyRecord[] {
  const problems: string[] = [];
  const list = (data as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(list)) throw new KeysFileError([`${file}: keys: expected a top-level "keys" list`]);
  const out: KeyRecord[] = [];
  const seenKeys = new Set<string>();
  const seenIds = new Set<string>();
  const share = createListSharing();
  list.forEach((entry, i) => {
    const { record, errors } = parseKeyRecord(entry, `${file}: keys[${i}]`, false, share);
    if (errors.length > 0) problems.push(...errors);
    if (!record) return;
    if (seenKeys.has(record.apiKey)) problems.push(`${file}: keys[${i}]: duplicate apiKey`);
    if (seenIds.has(record.id)) problems.push(`${file}: keys[${i}]: duplicate id`);
    seenKeys.add(record.apiKey);
    seenIds.add(record.id);
    out.push(record);
  });
  if (problems.length > 0) throw new KeysFileError(problems);
  return out;
}

/** The keys file's top-level `owners:`; throws KeysFileError listing every problem. */
export function parseOwnersDocument(data: unknown, file: string): OwnerRecord[] {
  const problems: string[] = [];
  const owners = parseOwnersMap((data as { owners?: unknown } | null)?.owners, `${file}: owners`, problems);
  if (problems.length > 0) throw new KeysFileError(problems);
  return owners;
}

/** Reads a keys file and checks it against config/schema/keys.schema.json and the record rules; lists every problem at once. */
export function loadKeysFile(file: string): KeyRecord[] {
  return loadKeysFileWithOwners(file).records;
}

/** loadKeysFile with the file's `owners:` too (the embedded store's owner limits). */
export function loadKeysFileWithOwners(file: string): { records: KeyRecord[]; owners: OwnerRecord[] } {
  let data: unknown;
  try {
    data = readDataFile(file);
  } catch (err) {
    throw new KeysFileError([`${file}: ${(err as Error).message}`]);
  }
  let records: KeyRecord[] = [];
  let owners: OwnerRecord[] = [];
  const found: string[] = [];
  try {
    records = parseKeysDocument(data, file);
  } catch (err) {
    if (!(err instanceof KeysFileError)) throw err;
    found.push(...err.problems);
  }
  try {
    owners = parseOwnersDocument(data, file);
  } catch (err) {
    if (!(err instanceof KeysFileError)) throw err;
    found.push(...err.problems);
  }
  const problems = withSchemaProblems('keys', data, file, found);
  if (problems.length > 0) throw new KeysFileError(problems);
  return { records, owners };
}
