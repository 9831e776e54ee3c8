import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

/** One request as the upstream saw it: recorded when its headers arrive, completed when its body ends. */
export interface Arrival {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  rawTrailers: string[];
  complete: boolean;
}

export interface WireUpstream {
  readonly url: string;
  readonly port: number;
  /** Every request the upstream's HTTP parser produced, in arrival order (also the ones whose body never ended). */
  readonly arrived: Arrival[];
  /** Every byte Keygate wrote to the upstream, on any connection. */
  wire(): string;
  /** Open connections from Keygate's agent to the upstream. */
  connections(): Promise<number>;
  handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  reset(): void;
  close(): Promise<void>;
}

/**
 * A recording upstream that misses nothing: requests are recorded when their
 * headers arrive (not when the body ends), and the raw bytes of every
 * connection are kept, so a smuggled request shows up either way.
 */
export async function startWireUpstream(): Promise<WireUpstream> {
  const arrived: Arrival[] = [];
  let bytes: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    const entry: Arrival = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body: '', rawTrailers: [], complete: false };
    arrived.push(entry);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', () => {});
    req.on('end', () => {
      entry.body = Buffer.concat(chunks).toString('latin1');
      entry.rawTrailers = req.rawTrailers;
      entry.complete = true;
    });
    if (up.handler) return up.handler(req, res);
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
  const up: WireUpstream = {
    url: `http://127.0.0.1:${port}`,
    port,
    arrived,
    wire: () => Buffer.concat(bytes).toString('latin1'),
    connections: () => new Promise((resolve, reject) => server.getConnections((err, n) => (err ? reject(err) : resolve(n)))),
    handler: undefined,
    reset() {
      arrived.length = 0;
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

export interface Exchange {
  /** Everything the server sent, latin1. */
  text: string;
  /** Status codes of every response found in the text, in order. */
  statuses: number[];
  /** True when the server closed the connection (FIN or reset) before we gave up waiting. */
  closed: boolean;
  /** ms from the first byte written to the close (or to giving up). */
  ms: number;
}

/**
 * Writes raw bytes (or a list of chunks with pauses) on a fresh connection
 * and collects the answer until the server closes or stays quiet for quietMs.
 */
export function exchange(port: number, data: string | Buffer | Array<string | Buffer | number>, options: { quietMs?: number; maxMs?: number } = {}): Promise<Exchange> {
  const quietMs = options.quietMs ?? 300;
  const maxMs = options.maxMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let quiet: NodeJS.Timeout | undefined;
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(quiet);
      clearTimeout(cap);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const statuses = [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
      resolve({ text, statuses, closed, ms: performance.now() - started });
    };
    const arm = () => {
      clearTimeout(quiet);
      quiet = setTimeout(() => finish(false), quietMs);
    };
    const cap = setTimeout(() => finish(false), maxMs);
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      arm();
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', (err) => (chunks.length > 0 || settled ? finish(true) : reject(err)));
    const parts = Array.isArray(data) ? data : [data];
    void (async () => {
      for (const part of parts) {
        if (settled) return;
        if (typeof part === 'number') await new Promise((r) => setTimeout(r, part));
        else socket.write(part);
      }
      arm();
    })();
  });
}

/** The header names of a raw header list, as sent. */
export const headerNames = (rawHeaders: readonly string[]) => rawHeaders.filter((_, i) => i % 2 === 0);

/** JSON body of the first response in a raw exchange. */
export function firstBody(text: string): unknown {
  const start = text.indexOf('\r\n\r\n');
  const m = /content-length: (\d+)/i.exec(text);
  if (start === -1 || !m || m[1] === '0') return undefined;
  return JSON.parse(text.slice(start + 4, start + 4 + Number(m[1])));
}
