// Tested in test/e2e/forwarding.test.ts, test/e2e/forward-auth.test.ts.
import type { ServerResponse } from 'node:http';

/** On every 40106 caused by the nonce window, and on the time endpoint: the server's time in nanoseconds. */
export const SERVER_TIME_HEADER = 'x-server-time';

/** The time endpoint's answer: the server's clock in nanoseconds, in the body and in X-Server-Time. */
export function writeTime(res: ServerResponse, nowNs: bigint, requestId: string, extraHeaders: readonly string[]) {
  const now = nowNs.toString();
  const body = `{"serverTime":"${now}"}`;
  const head = ['content-type', 'application/json', 'cache-control', 'no-store', SERVER_TIME_HEADER, now];
  head.push('content-length', String(body.length), 'x-request-id', requestId, ...extraHeaders);
  res.writeHead(200, head);
  res.end(body);
}
