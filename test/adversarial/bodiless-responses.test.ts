import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEYS, POLICY, SECRET } from '../helpers/adversarial.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { token } from '../helpers/tokens.js';
import { exchange } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

/**
 * Responses that never have a body (RFC 9110 §6.4.1: 204, 304 and any answer to HEAD; 1xx are
 * interim and not relayed) whatever framing header the upstream puts on them. Each must reach the
 * client as a complete response with no body, on a connection that stays usable, and the log line
 * must say what happened. Content-Length is relayed where RFC 9110 §8.6 lets a server send it
 * (304, HEAD: the length a 200 / GET would have had) and dropped where it forbids it (204);
 * Transfer-Encoding is hop-by-hop and never relayed.
 */
const FRAMINGS = {
  'content-length: 0': 'Content-Length: 0\r\n',
  'content-length: 42': 'Content-Length: 42\r\n',
  'transfer-encoding: chunked': 'Transfer-Encoding: chunked\r\n',
  'no framing header': '',
} as const;
type Framing = keyof typeof FRAMINGS;

interface Case {
  method: 'GET' | 'HEAD';
  status: number;
  framing: Framing;
}
const CASES: Case[] = [];
for (const framing of Object.keys(FRAMINGS) as Framing[]) {
  CASES.push({ method: 'GET', status: 204, framing }, { method: 'GET', status: 304, framing });
  for (const status of [200, 204, 304, 404]) CASES.push({ method: 'HEAD', status, framing });
}

/** The Content-Length the client must see, or undefined when it must see none. */
function expectedLength(c: Case): string | undefined {
  if (c.status === 204) return undefined; // RFC 9110 §8.6: MUST NOT send Content-Length in a 204
  const m = /^content-length: (\d+)$/.exec(c.framing);
  return m ? m[1] : undefined;
}

/**
 * A raw TCP upstream: answers each request with exactly the head the case in its query names, and no
 * body (as an upstream that follows the RFC does), or with a 200 "after" for the follow-up request.
 */
function rawUpstream(): Server {
  return createServer((s: Socket) => {
    let buf = '';
    s.on('error', () => {});
    s.on('data', (chunk: Buffer) => {
      buf += chunk.toString('latin1');
      let end: number;
      while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
        const head = buf.slice(0, end);
        buf = buf.slice(end + 4);
        const target = /^\S+ (\S+)/.exec(head)?.[1] ?? '';
        const q = new URL(target, 'http://x').searchParams;
        if (q.get('case') === 'after') {
          s.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter');
          continue;
        }
        const status = Number(q.get('status'));
        const framing = FRAMINGS[q.get('framing') as Framing];
        s.write(`HTTP/1.1 ${status} Whatever\r\nETag: "v1"\r\n${framing}\r\n`);
      }
    });
  });
}

describe('adversarial: bodiless upstream responses (204, 304, HEAD) × framing header', () => {
  let upstream: Server;
  let gate: RunningKeygate;
  beforeAll(async () => {
    upstream = rawUpstream();
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    gate = await startKeygate({
      upstream: `http://127.0.0.1:${(upstream.address() as { port: number }).port}`,
      keys: KEYS,
      env: { KEYGATE_CONFIG: POLICY },
    });
  });
  afterAll(async () => {
    await gate.close();
    await new Promise((r) => upstream.close(r));
  });

  it.each(CASES)('$method → $status with $framing: complete, bodiless, connection reusable', async (c) => {
    const query = `?status=${c.status}&framing=${encodeURIComponent(c.framing)}`;
    const auth = () => `Authorization: Bearer ${token('good', SECRET)}\r\n`;
    const logsBefore = gate.logs.length;
    const r = await exchange(
      gate.port,
      [
        `${c.method} ${ACCOUNTS_PATH}${query} HTTP/1.1\r\nHost: x\r\n${auth()}\r\n`,
        // The follow-up goes out once the first answer had time to arrive: if Keygate framed the
        // bodiless answer wrongly, the client would read "after"'s bytes as its body or see a cut.
        200,
        `GET ${ACCOUNTS_PATH}?case=after HTTP/1.1\r\nHost: x\r\n${auth()}Connection: close\r\n\r\n`,
      ],
      { quietMs: 3_000 },
    );
    expect(r.statuses).toEqual([c.status, 200]);
    const second = r.text.indexOf('HTTP/1.1 200 OK');
    const first = r.text.slice(0, second);
    // Nothing after the first head: no body, no chunk terminator.
    expect(first.endsWith('\r\n\r\n')).toBe(true);
    expect(first.indexOf('\r\n\r\n')).toBe(first.length - 4);
    expect(/etag: "v1"/i.test(first)).toBe(true);
    expect(/transfer-encoding/i.test(first)).toBe(false);
    const length = /\r\ncontent-length: *(\d+)/i.exec(first)?.[1];
    expect(length).toBe(expectedLength(c));
    expect(r.text.endsWith('after')).toBe(true);
    const lines = gate.logs
      .slice(logsBefore)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    // Requests go one after the other: the first request line is the bodiless exchange's.
    expect(lines.map((l) => [l.status, l.aborted ?? false])).toEqual([
      [c.status, false],
      [200, false],
    ]);
  });
});
