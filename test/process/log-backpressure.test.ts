import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { boundedDestination, createLogger } from '../../src/observe/logger.js';

/**
 * A log consumer that stops reading (stalled shipper, full pipe) must not make
 * Keygate buffer every line in memory: an attacker could grow the heap just by
 * sending requests. The destination drops past its bound instead.
 */
describe('log output under back-pressure', () => {
  it('keeps at most maxBytes unwritten and drops the rest', async () => {
    const fifo = join(mkdtempSync(join(tmpdir(), 'keygate-fifo-')), 'log');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const fd = openSync(fifo, 'r+'); // a reader end exists (ours), but nobody reads
    let dropped = false;
    const dest = boundedDestination({ fd, maxBytes: 1024 * 1024, onFirstDrop: () => (dropped = true) });
    const logger = createLogger({ level: 'info' }, dest);
    for (let i = 0; i < 30_000; i++)
      logger.info(
        { requestId: `r${i}`, route: '/api/v3/viewer/accounts', status: 200, pad: 'x'.repeat(200) },
        'request',
      );
    await new Promise((r) => setTimeout(r, 100));
    const buffered = (dest as unknown as { _len: number })._len;
    expect(dropped).toBe(true);
    expect(buffered).toBeLessThanOrEqual(1024 * 1024);
    (dest as unknown as { destroy(): void }).destroy(); // closes fd
  });

  it('writes in batches: a lone line waits for the flush interval, and a full batch goes out at once', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'keygate-log-')), 'out.log');
    const fd = openSync(file, 'w');
    const dest = boundedDestination({ fd, batchBytes: 4096, flushIntervalMs: 150 });
    const logger = createLogger({ level: 'info' }, dest);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    await sleep(20); // the destination is open
    logger.info({ requestId: 'lone' }, 'request');
    await sleep(40);
    expect(readFileSync(file, 'utf8')).toBe(''); // held: under batchBytes, interval not yet over
    await sleep(300);
    expect(readFileSync(file, 'utf8')).toContain('"requestId":"lone"'); // the periodic flush wrote it
    for (let i = 0; i < 40; i++) logger.info({ requestId: `burst${i}`, pad: 'x'.repeat(200) }, 'request');
    await sleep(40); // well under the interval: the batch size alone triggered the write
    expect(readFileSync(file, 'utf8')).toContain('"requestId":"burst0"');
    (dest as unknown as { destroy(): void }).destroy();
    closeSync(openSync(file, 'r'));
  });

  it('a process that exits right after logging still writes its last batched line', () => {
    // The built module, as the CLI runs it (npm test builds before vitest).
    const r = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
      const { createLogger } = await import(${JSON.stringify(new URL('../../dist/observe/logger.js', import.meta.url).pathname)});
      createLogger({ level: 'info' }).info({ requestId: 'last' }, 'request');
      process.exit(0);
    `,
      ],
      { encoding: 'utf8', cwd: new URL('../..', import.meta.url).pathname },
    );
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('"requestId":"last"');
  });
});
