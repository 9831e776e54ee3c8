import type { ServerResponse } from 'node:http';

/** On the clock endpoint's answer and on every 40106 caused by the nonce window: the server's time in nanoseconds. */
export const SERVER_TIME_HEADER = 'x-server-time';

/**
 * The clock endpoint's answer (GET/HEAD /api/v3/time while the policy's timeEndpoint is on): one
 * writer, so proxy mode, a forward-auth check and nginx's render step send the same bytes.
 */
export function writeTimeAnswer(res: ServerResponse, nowNs: string, requestId: string): void {
  const body = `{"serverTime":"${nowNs}"}`;
  res.writeHead(200, [
    'content-type',
    'application/json',
    'cache-control',
    'no-store',
    SERVER_TIME_HEADER,
    nowNs,
    'content-length',
    String(body.length),
    'x-request-id',
    requestId,
  ]);
  res.end(body);
}
