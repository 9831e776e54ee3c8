import { parseKeyRecord, type KeyRecord } from '../../src/keys/key-record.js';

/**
 * A valid key record with test defaults, for any tier. It lives apart from keygate.ts so that a unit test that
 * needs a key does not load the whole of Keygate (create-keygate.ts, both stores, ioredis, undici) to get one.
 */
export function makeKey(overrides: Partial<KeyRecord> & { apiKey: string; secret?: string }): KeyRecord {
  const { record, errors } = parseKeyRecord(
    {
      id: `id-${overrides.apiKey}`,
      apiSecret: overrides.secret ?? `secret-for-${overrides.apiKey}-0123456789`,
      scopes: ['accounts:read'],
      allowIps: [],
      createdAt: new Date().toISOString(),
      ...overrides,
    },
    'test key',
  );
  if (!record) throw new Error(errors.join('; '));
  return record;
}
