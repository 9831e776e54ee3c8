import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  /** The webhook-id header. */
  readonly id: string;
}

export interface WebhookReceiver {
  readonly url: string;
  /** Every request received, in arrival order. */
  readonly received: ReceivedWebhook[];
  /**
   * How to answer: a status, 'hang' (never answer; the request is held until close), or a promise of a
   * status (answered when the test settles it). Given the request and how many requests with its
   * webhook-id came before it. Default: 204.
   */
  answer: (w: ReceivedWebhook, earlier: number) => number | 'hang' | Promise<number>;
  /** An outage: stops listening (a connection is refused) until up(), which listens on the same port again. */
  down(): Promise<void>;
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A webhook receiver on a real socket that records every delivery as it arrives. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const receiver: WebhookReceiver = {
    url: '',
    received,
    answer: () => 204,
    down: () => Promise.resolve(),
    up: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const w = {
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        id: String(req.headers['webhook-id']),
      };
      const earlier = received.filter((r) => r.id === w.id).length;
      received.push(w);
      const status = receiver.answer(w, earlier);
      // Held: closed by its sender's timeout, or by close().
      if (status === 'hang') return;
      void Promise.resolve(status).then((code) => {
        if (!res.destroyed) res.writeHead(code).end();
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/hooks/keygate`,
    down: close,
    up: () => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve)),
    close: () => (server.listening ? close() : Promise.resolve()),
  });
}
