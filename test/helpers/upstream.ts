import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

export interface RecordingUpstream {
  readonly url: string;
  readonly received: Received[];
  /** Replace the default 200 JSON answer. */
  handler: ((req: IncomingMessage, res: ServerResponse, body: string) => void) | undefined;
  close(): Promise<void>;
}

/** A real HTTP upstream that records every request it gets. */
export async function startUpstream(): Promise<RecordingUpstream> {
  const received: Received[] = [];
  const up: RecordingUpstream = {
    url: '',
    received,
    handler: undefined,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body });
      if (up.handler) return up.handler(req, res, body);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true, keyId: req.headers['x-api-key-id'] ?? null }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  (up as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return up;
}
