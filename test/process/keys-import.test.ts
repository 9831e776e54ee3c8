import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMPORT_BATCH } from '../../src/operations/key-import.js';
import { ACCOUNTS_PATH as PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate } from '../helpers/keygate.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { runKeygate, spawnKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';

/**
 * `keygate keys import` of files far larger than one atomic step, into a real Redis: written batch
 * by batch (key-operations.ts importKeys), so no script call carries the whole file. Before that,
 * 100,000 keys failed with "Maximum call stack size exceeded" and 10,000 crashed inside ioredis.
 */
const INDEX = 'keygate:{keystore}:index';
const apiKeyOf = (prefix: string, i: number) => `${prefix}-${String(i).padStart(6, '0')}`;
const secretOf = (prefix: string, i: number) => `${prefix}-secret-${i}-0123456789abcdef`;

describe('keygate keys import, batch by batch', () => {
  let redis: TestRedis;
  let raw: Redis;
  let upstream: RecordingUpstream;
  let env: Record<string, string>;
  const dir = mkdtempSync(join(tmpdir(), 'keygate-import-'));
  /** A JSON keys file of n keys named <prefix>-000000…; `ids` overrides some keys' ids. */
  const keysFile = (prefix: string, n: number, ids: Record<number, string> = {}) => {
    const path = join(dir, `${prefix}.json`);
    const keys = Array.from({ length: n }, (_, i) => ({
      apiKey: apiKeyOf(prefix, i),
      apiSecret: secretOf(prefix, i),
      scopes: ['accounts:read'],
      ...(ids[i] !== undefined && { id: ids[i] }),
    }));
    writeFileSync(path, JSON.stringify({ keys }));
    return path;
  };
  /** The import as a child process; stdout is its JSON, stderr holds one audit line per key written. */
  const runImport = async (file: string, ...more: string[]) => {
    const child = spawnKeygate(['keys', 'import', file, '--json', ...more], { env });
    const exit = await child.exited;
    const all = child.output(); // stdout, a newline, stderr
    const stdout = all.slice(0, all.length - child.stderr().length - 1);
    // A crash prints no JSON: the exit code and stderr say what happened.
    const json = (stdout.startsWith('{') ? JSON.parse(stdout) : {}) as Record<string, unknown>;
    return { code: exit.code, json, stderr: child.stderr() };
  };

  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
    env = { KEYGATE_REDIS_URL: redis.url, KEYGATE_ACTOR: 'importer' };
    upstream = await startRecordingUpstream();
  });
  afterAll(async () => {
    raw?.disconnect();
    await upstream?.close();
    await redis?.stop();
  });

  it(
    'imports 100,000 keys into Redis; an imported key authenticates through a running Keygate',
    async () => {
      const n = 100_000;
      const r = await runImport(keysFile('bulk', n));
      expect(r.code, r.stderr.slice(-2_000)).toBe(0);
      expect(r.json).toEqual({ total: n, created: n, replaced: 0, skipped: 0, complete: true });
      expect(await raw.zcard(INDEX)).toBe(n);

      const gate = await startKeygate({ upstream: upstream.url, redisUrl: redis.url });
      try {
        const i = 77_777;
        const ok = await send(gate.url, PATH, { headers: bearer(token(apiKeyOf('bulk', i), secretOf('bulk', i))) });
        expect(ok.status).toBe(200);
        const wrong = await send(gate.url, PATH, { headers: bearer(token(apiKeyOf('bulk', i), secretOf('bulk', 1))) });
        expect(wrong.status).toBe(401);
      } finally {
        await gate.close();
      }
      // Once more: every key exists, so every key is skipped and nothing is written.
      const again = await runImport(keysFile('bulk', n));
      expect(again.json).toEqual({ total: n, created: 0, replaced: 0, skipped: n, complete: true });
    },
    guard(120_000),
  );

  it('a batch refused after others were applied stops the import, says how many, and a re-run completes it', async () => {
    // A key outside the file holds the id of the file's key in the second batch: that batch is refused.
    const holder = keysFile('holder', 1, { 0: 'taken-id' });
    expect((await runImport(holder)).json).toMatchObject({ created: 1 });
    const n = IMPORT_BATCH * 2 + 50;
    const clash = IMPORT_BATCH + 10;
    const file = keysFile('part', n, { [clash]: 'taken-id' });
    const before = await raw.zcard(INDEX);

    const stopped = await runImport(file);
    expect(stopped.code, stopped.stderr.slice(-2_000)).toBe(1);
    expect(stopped.json).toMatchObject({ total: n, created: IMPORT_BATCH, replaced: 0, skipped: 0, complete: false });
    expect(stopped.json.stopped).toMatch(/id "taken-id" is already the id of key holder-000000/);
    expect(stopped.stderr).toContain(`import stopped after ${IMPORT_BATCH} of ${n} keys`);
    expect(stopped.stderr).toContain('Re-running the same import is safe: it skips the keys already imported');
    expect(await raw.zcard(INDEX)).toBe(before + IMPORT_BATCH);
    expect(await raw.exists(`keygate:{keystore}:key:${apiKeyOf('part', IMPORT_BATCH)}`)).toBe(0);

    await runKeygate(['keys', 'delete', apiKeyOf('holder', 0)], env);
    const rerun = await runImport(file);
    expect(rerun.code).toBe(0);
    expect(rerun.json).toEqual({
      total: n,
      created: n - IMPORT_BATCH,
      replaced: 0,
      skipped: IMPORT_BATCH,
      complete: true,
    });
    expect(await raw.zcard(INDEX)).toBe(before - 1 + n);
  });
});
