import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { serveKeygate, type ServedKeygate } from '../helpers/spawn-keygate.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';
import { rawHandshake, STREAM_PATH, STREAM_SCOPE, writeStreamPolicy } from '../helpers/ws-streams.js';

const SECRET = 'stream-secret-0123456789abcdef';
const MB = 1024 * 1024;
/** What the upstream tries to push at a client that never reads: far more than the bound below. */
const ATTEMPT = 512 * MB;
/** Keygate's RSS may grow by at most this much while it does. */
const BOUND = 64 * MB;

/**
 * Backpressure, measured on a real `keygate serve` process: a client completes the handshake and then
 * never reads, while the upstream pushes 1 MiB messages as fast as its socket takes them. Keygate stops
 * reading the upstream once the client's socket buffer is full, so the upstream stalls after a few
 * socket buffers' worth, and Keygate's memory does not grow with what the upstream tried to send.
 */
describe('streams: a client that stops reading does not grow Keygate’s memory', () => {
  let wss: WebSocketServer;
  let gate: ServedKeygate;
  let sent = 0;

  beforeAll(async () => {
    wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    const chunk = randomBytes(MB);
    wss.on('connection', (ws) => {
      ws.on('error', () => {});
      // One message in flight at a time: the upstream itself holds at most 1 MiB.
      const next = () => {
        if (sent >= ATTEMPT || ws.readyState !== ws.OPEN) return;
        ws.send(chunk, { binary: true }, (err) => {
          if (err) return;
          sent += MB;
          next();
        });
      };
      next();
    });
    const dir = mkdtempSync(join(tmpdir(), 'keygate-stream-bp-'));
    const keysFile = join(dir, 'keys.yaml');
    writeFileSync(
      keysFile,
      `keys:\n  - apiKey: streamer\n    apiSecret: ${SECRET}\n    id: s1\n    scopes: [${STREAM_SCOPE}]\n    allowIps: []\n`,
    );
    const { port } = wss.address() as { port: number };
    gate = await serveKeygate({
      KEYGATE_UPSTREAM: `http://127.0.0.1:${port}`,
      KEYGATE_CONFIG: writeStreamPolicy(),
      KEYGATE_KEYS_FILE: keysFile,
    });
  });
  afterAll(async () => {
    await gate?.stop();
    await new Promise<void>((resolve) => {
      for (const c of wss.clients) c.terminate();
      wss.close(() => resolve());
    });
  });

  it('the upstream is held back and Keygate’s RSS stays within the bound', async () => {
    const baseline = gate.rss();
    const { socket: client } = await rawHandshake(gate.port, STREAM_PATH, token('streamer', SECRET), {
      collect: false,
    });
    client.pause();
    // Wait until the upstream has stopped making progress for 2 s: it is held back, or it sent everything.
    let last = -1;
    let still = 0;
    const deadline = Date.now() + guard(60_000);
    while (still < 10 && sent < ATTEMPT && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200));
      still = sent === last ? still + 1 : 0;
      last = sent;
    }
    const grown = gate.rss() - baseline;
    console.log(
      `[streams] client not reading: upstream pushed ${sent / MB} MiB of ${ATTEMPT / MB} before stalling; Keygate RSS +${(grown / MB).toFixed(1)} MiB`,
    );
    expect(sent).toBeLessThan(BOUND);
    expect(grown).toBeLessThan(BOUND);
    // Reading again lets the stream flow on.
    const before = sent;
    client.on('data', () => {});
    client.resume();
    await expect.poll(() => sent, { timeout: guard(30_000) }).toBeGreaterThan(before + 8 * MB);
    client.destroy();
  });
});
