import { execFile } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { claimPort, freePort, HARNESS_PORTS_END } from '../helpers/free-port.js';

const HARNESS = new URL('../../scripts/harness/free-port.mjs', import.meta.url).href;

/** `claimPort(port)` in another process, as another test worker would call it. */
async function claimElsewhere(port: number): Promise<boolean> {
  const { stdout } = await promisify(execFile)(process.execPath, [
    '--input-type=module',
    '-e',
    `import { claimPort } from '${HARNESS}'; process.stdout.write(String(await claimPort(${port})));`,
  ]);
  return stdout === 'true';
}

describe("the harness's ports (scripts/harness/free-port.mjs)", () => {
  it('hands out distinct ports below the ephemeral range, where no listen(0) lands', async () => {
    const ports = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    for (const p of ports) expect(p < HARNESS_PORTS_END && p >= 10_000, String(p)).toBe(true);
    // What took the admin port of `keygate demo` once: its upstream listening on port 0.
    for (let i = 0; i < 200; i++) {
      const s = createServer();
      await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
      const { port } = s.address() as AddressInfo;
      await new Promise((resolve) => s.close(resolve));
      expect(ports).not.toContain(port);
    }
  });

  it('a port claimed here is not handed out by another process, and is claimable there once not claimed', async () => {
    const mine = await freePort();
    expect(await claimElsewhere(mine)).toBe(false);
    expect(await claimPort(mine)).toBe(false);
    let unclaimed = mine + 1;
    while (!(await claimElsewhere(unclaimed))) unclaimed++;
    expect(unclaimed < HARNESS_PORTS_END).toBe(true);
  });

  it('never hands out a port something listens on', async () => {
    const s = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => s.listen(port + 1, '127.0.0.1', resolve));
    try {
      expect(await claimElsewhere(port + 1)).toBe(false);
    } finally {
      await new Promise((resolve) => s.close(resolve));
    }
  });
});
