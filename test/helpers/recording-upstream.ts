import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One request as the upstream saw it: recorded when its headers arrive, completed when its body ends. */
export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  /** The body, latin1 (one character per byte), once `complete`. */
  body: string;
  rawTrailers: string[];
  complete: boolean;
}

export type UpstreamHandler = (req: IncomingMessage, res: ServerResponse, received: Received) => void;

export interface RecordingUpstream {
  readonly url: string;
  readonly port: number;
  /** Every request the upstream's HTTP parser produced, in arrival order (also the ones whose body never ended). */
  readonly received: Received[];
  /** Every byte Keygate wrote to the upstream, on any connection. */
  wire(): string;
  /** Open connections from Keygate's agent to the upstream. */
  connections(): Promise<number>;
  /**
   * Replaces the default answer (200 JSON naming the X-Api-Key-Id and URL it got, sent once the body ended).
   * Called as soon as the headers arrive; `received.body` is complete on the request's 'end' event.
   */
  handler: UpstreamHandler | undefined;
  /** Forgets what was received and restores the default answer. */
  reset(): void;
  close(): Promise<void>;
}

/**
 * The recording upstream: a real HTTP server that misses nothing. Requests are recorded when their
 * headers arrive (not when the body ends), and the raw bytes of every connection are kept, so a
 * smuggled request shows up either way.
 */
export async function startRecordingUpstream(): Promise<RecordingUpstream> {
  const received: Received[] = [];
  let bytes: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const entry: Received = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: '',
      rawTrailers: [],
      complete: false,
    };
    received.push(entry);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => {});
    // Registered before any handler's listener, so a handler reading `entry.body` on 'end' sees it whole.
    req.on('end', () => {
      entry.body = Buffer.concat(chunks).toString('latin1');
      entry.rawTrailers = req.rawTrailers;
      entry.complete = true;
    });
    if (up.handler) return up.handler(req, res, entry);
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true, keyId: req.headers['x-api-key-id'] ?? null, url: req.url }));
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('data', (c: Buffer) => bytes.push(c));
  });
  server.on('clientError', (_err, s: Socket) => s.destroy());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const up: RecordingUpstream = {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    wire: () => Buffer.concat(bytes).toString('latin1'),
    connections: () =>
      new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n)))),
    handler: undefined,
    reset() {
      received.length = 0;
      bytes = [];
      up.handler = undefined;
    },
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  return up;
}

/** The header names of a raw header list, as sent. */
export const headerNames = (rawHeaders: readonly string[]) => rawHeaders.filter((_, i) => i % 2 === 0);
