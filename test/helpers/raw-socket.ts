import { connect } from 'node:net';

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
 * The raw-socket client: writes bytes exactly as given (or a list of chunks, numbers being pauses in ms)
 * on a fresh connection and collects the answer until the server closes or stays quiet for quietMs.
 * For requests an HTTP client would refuse to send or would fix up on the way.
 *
 * Quiet is counted from the last byte received, never from the last byte sent: on a busy machine the
 * first answer can take longer than quietMs, and "nothing yet" is not "nothing". Before the first byte
 * it waits up to firstByteMs (default maxMs). A test that expects silence passes a firstByteMs.
 */
export function exchange(
  port: number,
  data: string | Buffer | Array<string | Buffer | number>,
  options: { quietMs?: number; maxMs?: number; firstByteMs?: number } = {},
): Promise<Exchange> {
  const quietMs = options.quietMs ?? 300;
  const maxMs = options.maxMs ?? 10_000;
  const firstByteMs = options.firstByteMs ?? maxMs;
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
      quiet = setTimeout(() => finish(false), chunks.length > 0 ? quietMs : firstByteMs);
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

/** Status of the response the text starts with; 0 when it does not start with a status line. */
export function statusOf(response: string): number {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(response);
  return m ? Number(m[1]) : 0;
}

/** JSON body of the first response in a raw exchange. */
export function firstBody(text: string): unknown {
  const start = text.indexOf('\r\n\r\n');
  const m = /content-length: (\d+)/i.exec(text);
  if (start === -1 || !m || m[1] === '0') return undefined;
  return JSON.parse(text.slice(start + 4, start + 4 + Number(m[1])));
}
