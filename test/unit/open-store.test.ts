import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createStoreFromConfig } from '../../src/open-store.js';
import { parseKeyRecord, type KeyRecord } from '../../src/keys/key-record.js';

const dir = mkdtempSync(join(tmpdir(), 'keygate-create-'));
const file = join(dir, 'keys.yaml');
writeFileSync(file, 'keys:\n  - apiKey: from-file\n    apiSecret: long-enough-secret-123\n');
const given = parseKeyRecord({ apiKey: 'given', apiSecret: 'long-enough-secret-123' }, 'k').record as KeyRecord;

describe('createStoreFromConfig (embedded)', () => {
  it.each<[string, readonly KeyRecord[] | undefined, string, string]>([
    ['reads the keys file when no records are given', undefined, 'from-file', 'given'],
    ['uses the records serve already read, without a second read', [given], 'given', 'from-file'],
  ])('%s', async (_name, keys, present, absent) => {
    const config = loadConfig({ KEYGATE_UPSTREAM: 'http://127.0.0.1:3000', KEYGATE_KEYS_FILE: file });
    const store = createStoreFromConfig(config, {
      logger: pino({ level: 'silent' }),
      clock: systemClock(),
      ...(keys && { keys }),
    });
    try {
      expect((await store.getKey(present))?.apiKey).toBe(present);
      expect(await store.getKey(absent)).toBeNull();
    } finally {
      await store.close();
    }
  });
});
