import { createServer, type Server } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { freePort } from '../helpers/free-port.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';

const SECRET = 'export-secret-0123456789abcdef';
const KEYS = [makeKey({ apiKey: 'exported', secret: SECRET })];
const QUEUE = 16;
const BATCH = 4;
/** The exporter's own wait for a collector that never answers: far past any request's time, so a request that waited for it would fail its guard. */
const EXPORT_TIMEOUT_MS = 120_000;

/** A drop count from /metrics (OpenMetrics while tracing is on: read by its sample line). */
const dropped = async (kg: RunningKeygate, reason: string) => {
  const text = (await send(kg.adminUrl, '/metrics')).body;
  const line = new RegExp(`^keygate_trace_spans_dropped_total\\{reason="${reason}"\\} (\\S+)$`, 'm').exec(text);
  if (line === null) throw new Error(`no keygate_trace_spans_dropped_total{reason="${reason}"} in /metrics`);
  return Number(line[1]);
};

describe('a collector that accepts connections and never answers', () => {
  let blackHole: Server;
  const held = new Set<Socket>();
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;
  beforeAll(async () => {
    // Accepts, reads, never answers: the exporter's request hangs until its timeout.
    blackHole = createServer((s) => {
      held.add(s);
      s.on('data', () => {});
      s.on('error', () => {});
    });
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    upstream = await startRecordingUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      keys: KEYS,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(blackHole.address() as AddressInfo).port}`,
        OTEL_BSP_MAX_QUEUE_SIZE: String(QUEUE),
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: String(BATCH),
        OTEL_BSP_SCHEDULE_DELAY: '10',
        OTEL_BSP_EXPORT_TIMEOUT: String(EXPORT_TIMEOUT_MS),
      },
    });
  });
  afterAll(async () => {
    await upstream?.close();
    for (const s of held) s.destroy();
    blackHole?.close();
  });

  it('slows no request, keeps its queue bounded, counts what it drops, and does not hold the shutdown', async () => {
    const requests = 60;
    for (let i = 0; i < requests; i++) {
      // Each request is answered within a guard far below the exporter's timeout: none waits for it.
      const reply = await send(kg.url, ACCOUNTS_PATH, {
        headers: bearer(token('exported', SECRET)),
        timeoutMs: guard(5_000),
      });
      expect(reply.status).toBe(200);
    }
    // Two spans a request (SERVER, upstream CLIENT); at most QUEUE wait and one batch is out: the rest are dropped.
    const spans = requests * 2;
    await expect
      .poll(() => dropped(kg, 'queue_full'), { timeout: guard(5_000) })
      .toBeGreaterThanOrEqual(spans - QUEUE - BATCH);
    expect(await dropped(kg, 'queue_full')).toBeLessThanOrEqual(spans);
    // The shutdown waits for the last export a bounded time, not the exporter's two minutes.
    const closing = kg.close().then(() => 'closed');
    const timeout = new Promise((resolve) => setTimeout(() => resolve('still closing'), guard(30_000)).unref());
    expect(await Promise.race([closing, timeout])).toBe('closed');
  });
});

describe('a collector that is down (connection refused)', () => {
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      keys: KEYS,
      env: {
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://127.0.0.1:${await freePort()}/v1/traces`,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '10',
        OTEL_BSP_EXPORT_TIMEOUT: '1000',
      },
    });
  });
  afterAll(async () => {
    await kg?.close();
    await upstream?.close();
  });

  it('answers every request, and counts the batches it could not send', async () => {
    for (let i = 0; i < 10; i++)
      expect((await send(kg.url, ACCOUNTS_PATH, { headers: bearer(token('exported', SECRET)) })).status).toBe(200);
    await expect.poll(() => dropped(kg, 'export_failed'), { timeout: guard(20_000), interval: 100 }).toBeGreaterThan(0);
  });
});
