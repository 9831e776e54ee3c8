import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import { acceptFor } from '../../src/gateway/streams/ws-frames.js';
import { token } from './tokens.js';

/** The stream route of the test policy (`upgrade: websocket`, scope stream:read) and a plain route beside it. */
export const STREAM_PATH = '/api/v3/stream/orders';
export const PLAIN_PATH = '/api/v3/viewer/accounts';
export const STREAM_SCOPE = 'stream:read';

/** A policy file with one stream route and one plain route; returns its path (for KEYGATE_CONFIG). */
export function writeStreamPolicy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-streams-'));
  const file = join(dir, 'routes.yaml');
  writeFileSync(
    file,
    [
      'routes:',
      '  - method: GET',
      '    path: /api/v3/stream/:channel',
      `    scopes: [${STREAM_SCOPE}]`,
      '    upgrade: websocket',
      '  - method: GET',
      `    path: ${PLAIN_PATH}`,
      '    scopes: [accounts:read]',
      '',
    ].join('\n'),
  );
  return file;
}

export interface UpstreamConnection {
  readonly socket: WebSocket;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  /** Every message received, with its binary flag. */
  readonly received: { data: Buffer; isBinary: boolean }[];
  /** Set when the connection closed: the close code the upstream saw. */
  closeCode?: number;
  closed: Promise<number>;
}

/** A `ws` server as the upstream: records every handshake, echoes nothing unless told, keeps every message. */
export async function startWsUpstream(): Promise<{
  url: string;
  connections: UpstreamConnection[];
  /** Every upgrade request the upstream received (even those it did not complete). */
  handshakes: IncomingHttpHeaders[];
  close(): Promise<void>;
}> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const connections: UpstreamConnection[] = [];
  const handshakes: IncomingHttpHeaders[] = [];
  wss.on('headers', (_headers, req) => handshakes.push(req.headers));
  wss.on('connection', (socket, req) => {
    let settle: (code: number) => void = () => {};
    const conn: UpstreamConnection = {
      socket,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      received: [],
      closed: new Promise<number>((resolve) => (settle = resolve)),
    };
    socket.on('message', (data: RawData, isBinary) => conn.received.push({ data: toBuffer(data), isBinary }));
    socket.on('close', (code) => {
      conn.closeCode = code;
      settle(code);
    });
    socket.on('error', () => {});
    connections.push(conn);
  });
  const { port } = wss.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    connections,
    handshakes,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}

function toBuffer(data: RawData): Buffer {
  return Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
}

export interface ClientStream {
  readonly ws: WebSocket;
  readonly received: { data: Buffer; isBinary: boolean }[];
  /** The close code and reason the client saw, and when (Date.now()). */
  readonly closed: Promise<{ code: number; reason: string; at: number }>;
}

/** Opens a stream through Keygate with a fresh token; resolves once open, rejects with the HTTP status refused. */
export function openStream(
  base: string,
  apiKey: string,
  secret: string,
  path = STREAM_PATH,
  headers: Record<string, string> = {},
): Promise<ClientStream> {
  const url = `${base.replace(/^http/, 'ws')}${path}`;
  const ws = new WebSocket(url, {
    headers: { authorization: `Bearer ${token(apiKey, secret)}`, ...headers },
    perMessageDeflate: false,
  });
  const received: ClientStream['received'] = [];
  ws.on('message', (data, isBinary) => received.push({ data: toBuffer(data), isBinary }));
  const closed = new Promise<{ code: number; reason: string; at: number }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), at: Date.now() })),
  );
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, received, closed }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => reject(new RefusedUpgrade(res.statusCode ?? 0, body)));
    });
    ws.once('error', (err) => reject(err));
  });
}

export class RefusedUpgrade extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`upgrade refused with ${status}: ${body}`);
  }
}

/** The refusal an upgrade got: its status and the code in its body. */
export async function refusalOf(attempt: Promise<unknown>): Promise<{ status: number; code: number }> {
  try {
    await attempt;
  } catch (err) {
    if (err instanceof RefusedUpgrade)
      return { status: err.status, code: (JSON.parse(err.body) as { code: number }).code };
    throw err;
  }
  throw new Error('the upgrade was not refused');
}

/**
 * A raw TCP upstream that completes the WebSocket handshake by hand and records every byte after it
 * (frames exactly as Keygate relays them; `ws` would unmask and reassemble them).
 */
export async function startRawUpstream(): Promise<{
  url: string;
  received: Buffer[];
  connected: Promise<Socket>;
  close(): Promise<void>;
}> {
  const received: Buffer[] = [];
  let resolveConnected: (s: Socket) => void = () => {};
  const connected = new Promise<Socket>((r) => (resolveConnected = r));
  // Half-open: it can still finish a frame after Keygate's close frame and FIN have arrived.
  const server: Server = createServer({ allowHalfOpen: true }, (socket) => {
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      const key = /sec-websocket-key: *(\S+)/i.exec(head.subarray(0, end).toString())?.[1] ?? '';
      socket.write(
        `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptFor(key)}\r\n\r\n`,
      );
      if (head.length > end + 4) received.push(head.subarray(end + 4));
      socket.on('data', (c: Buffer) => received.push(c));
      resolveConnected(socket);
    };
    socket.on('data', onData);
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    connected,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        void connected.then((s) => s.destroy());
      }),
  };
}

/**
 * A raw client handshake through Keygate on `path`; resolves after a 101 whose Sec-WebSocket-Accept is right.
 * `collect` (default): the bytes that follow are pushed to `received`; `collect: false` leaves them unread in
 * the paused socket (a client that does not read: backpressure).
 */
export async function rawHandshake(
  port: number,
  path: string,
  bearer: string,
  options: { collect?: boolean } = {},
): Promise<{ socket: Socket; received: Buffer[] }> {
  const key = randomBytes(16).toString('base64');
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\nAuthorization: Bearer ${bearer}\r\n\r\n`,
  );
  const received: Buffer[] = [];
  return new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      const text = head.subarray(0, end).toString();
      if (!text.startsWith('HTTP/1.1 101 ') || !text.includes(`Sec-WebSocket-Accept: ${acceptFor(key)}`))
        return reject(new Error(`no 101: ${text.slice(0, 200)}`));
      if (options.collect === false) {
        socket.pause();
        return resolve({ socket, received });
      }
      if (head.length > end + 4) received.push(head.subarray(end + 4));
      socket.on('data', (c: Buffer) => received.push(c));
      resolve({ socket, received });
    };
    socket.on('data', onData);
    socket.on('error', reject);
  });
}
