import { spawnSync } from 'node:child_process';
import { mkdtempSync, openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { boundedDestination, createLogger } from '../src/observe/logger.js';

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
    for (let i = 0; i < 30_000; i++) logger.info({ requestId: `r${i}`, route: '/api/v3/viewer/accounts', status: 200, pad: 'x'.repeat(200) }, 'request');
    await new Promise((r) => setTimeout(r, 100));
    const buffered = (dest as unknown as { _len: number })._len;
    expect(dropped).toBe(true);
    expect(buffered).toBeLessThanOrEqual(1024 * 1024);
    (dest as unknown as { destroy(): void }).destroy(); // closes fd
  });
});
