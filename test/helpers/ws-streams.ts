import { mkdtempSync, writeFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
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
