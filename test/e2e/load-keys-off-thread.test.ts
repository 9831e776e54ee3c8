import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadKeysOffThread } from '../../src/keys/load-keys-off-thread.js';
import type { KeyRecord } from '../../src/keys/key-record.js';

/**
 * The worker thread hands records over a batch at a time (of 1,000), each in its own turn of the
 * serving thread's event loop, with that turn's other work (requests) run in between. A port
 * delivers, in one turn, every message that arrives while it is being drained: a batch asked for
 * at once was answered while the last one was still being added, and the batches ran back to back.
 */
const dir = mkdtempSync(join(tmpdir(), 'keygate-off-thread-'));
const SECRET = 'off-thread-secret-0123456789abcdef';

function keysFile(n: number): string {
  const file = join(dir, `keys-${n}.json`);
  const keys = Array.from({ length: n }, (_, i) => ({
    apiKey: `key-${i}`,
    apiSecret: SECRET,
    scopes: ['accounts:read'],
  }));
  writeFileSync(file, JSON.stringify({ keys }));
  return file;
}

/** Work the size of adding a batch to a large staged set, so the worker's answer arrives meanwhile. */
function busy(ms: number) {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

describe('loadKeysOffThread', () => {
  it.each([
    { keys: 1, batches: 1 },
    { keys: 2_500, batches: 3 },
    { keys: 6_000, batches: 6 },
  ])(
    '$keys keys: every record, in order, in $batches batches, each in its own event-loop turn',
    async ({ keys, batches }) => {
      const file = keysFile(keys);
      let turns = 0;
      let ticking = true;
      const tick = () => {
        turns++;
        if (ticking) setImmediate(tick);
      };
      tick();
      const seen: KeyRecord[] = [];
      const turnOfBatch: number[] = [];
      try {
        const count = await loadKeysOffThread(file, (batch) => {
          turnOfBatch.push(turns);
          seen.push(...batch);
          busy(50);
        });
        expect(count).toBe(keys);
      } finally {
        ticking = false;
      }
      expect(seen.map((r) => r.apiKey)).toEqual(Array.from({ length: keys }, (_, i) => `key-${i}`));
      expect(turnOfBatch).toHaveLength(batches);
      // Each batch in a later turn than the one before: other work ran in between.
      for (let i = 1; i < turnOfBatch.length; i++) expect(turnOfBatch[i]).toBeGreaterThan(turnOfBatch[i - 1] as number);
    },
  );

  it("hands over the file's owners: (issue 42) once every key batch has been", async () => {
    const file = join(dir, 'owners.json');
    writeFileSync(
      file,
      JSON.stringify({
        keys: [{ apiKey: 'k', apiSecret: SECRET, owner: 'acme' }],
        owners: { acme: { rateLimit: { rate: '12/h', burst: 12 } } },
      }),
    );
    const order: string[] = [];
    const count = await loadKeysOffThread(
      file,
      (batch) => order.push(`keys ${batch.length}`),
      undefined,
      (owners) => order.push(`owners ${JSON.stringify(owners)}`),
    );
    expect(count).toBe(1);
    expect(order).toEqual(['keys 1', 'owners [{"owner":"acme","rateLimit":{"rate":"12/h","burst":12}}]']);
  });

  it('rejects a broken file with its problems and delivers nothing', async () => {
    const file = join(dir, 'broken.json');
    writeFileSync(file, JSON.stringify({ keys: [{ apiKey: 'k' }] }));
    const seen: KeyRecord[] = [];
    await expect(loadKeysOffThread(file, (b) => seen.push(...b))).rejects.toMatchObject({
      problems: expect.arrayContaining([expect.stringContaining(file)]),
    });
    expect(seen).toEqual([]);
  });
});
