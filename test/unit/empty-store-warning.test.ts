import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { warnWhenSecretsPlain } from '../../src/cli/serve/empty-store-warning.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { makeKey } from '../helpers/make-key.js';

const PLAIN = 'plain-secret-never-logged-0123456789';
const SEALED = 'kg1.0a1b2c3d.aXY.Y2lwaGVy.dGFn';
const LATER = new Date(Date.now() + 3_600_000).toISOString();

/** Runs the check over a memory store holding `keys`; the log lines it wrote once the store was read. */
async function warningsFor(keys: readonly KeyRecord[]): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
  );
  const store = createMemoryStore({ keys }, { clock: manualClock(Date.now()) });
  const read = vi.fn(store.listKeys.bind(store));
  const stop = warnWhenSecretsPlain({ where: 'redis://r:6379/0', retryMs: 10 }, { store: { listKeys: read }, logger });
  await vi.waitFor(() => expect(read).toHaveBeenCalled());
  await new Promise((resolve) => setImmediate(resolve));
  stop();
  await store.close();
  return lines;
}

describe('warnWhenSecretsPlain', () => {
  it.each<[string, KeyRecord[], number | undefined]>([
    [
      'plain secrets, own or in their grace: one warning with the count',
      [
        makeKey({ apiKey: 'a', secret: PLAIN }),
        makeKey({ apiKey: 'b', secret: SEALED, previousSecrets: [{ secret: PLAIN, validUntil: LATER }] }),
        makeKey({ apiKey: 'c', secret: SEALED }),
      ],
      2,
    ],
    ['only sealed secrets: no warning', [makeKey({ apiKey: 'c', secret: SEALED })], undefined],
    ['no keys: no warning (the empty-store warning says so)', [], undefined],
  ])('%s', async (_name, keys, plainKeys) => {
    const lines = await warningsFor(keys);
    const warned = lines.filter((l) => l.level === 40);
    if (plainKeys === undefined) {
      expect(warned).toEqual([]);
      return;
    }
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ plainSecretKeys: plainKeys, store: 'redis://r:6379/0' });
    expect(String(warned[0]?.msg)).toContain(`holds ${plainKeys} keys with a secret stored unencrypted`);
    expect(String(warned[0]?.msg)).toContain('set KEYGATE_SECRET_ENCRYPTION_KEY and run keygate keys reencrypt');
    expect(JSON.stringify(lines)).not.toContain(PLAIN);
  });
});
