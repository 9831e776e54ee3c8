// Tested in test/e2e/forwarding.test.ts, test/e2e/create-gateway.test.ts, test/adversarial/smuggling.test.ts.
import type { IncomingMessage } from 'node:http';
import { forwardHeaders, KEY_ID_HEADER, KEY_OWNER_HEADER } from '../pipeline/forward-headers.js';
import { ASSERTION_HEADER } from '../keys/assertion-signer.js';
import type { Forwarder } from './forwarder.js';
import type { GatewayMode, OriginalRequest } from './gateway-mode.js';
import { roundMs } from '../observe/request-record.js';
import { writeTime } from './time-endpoint.js';

const NO_HEADERS: readonly string[] = Object.freeze([]);

/**
 * Proxy mode (KEYGATE_MODE=proxy): the request checked is the one received, and
 * a pass forwards it to the upstream with the key's identity added.
 */
export function createProxyMode(forwarder: Forwarder): GatewayMode {
  return {
    preempt: () => false,
    original: (req: IncomingMessage): OriginalRequest => ({ ok: true, method: req.method, url: req.url }),
    upstreamHead: (raw, peerIp, peerTrusted, requestId) => forwardHeaders(raw, { peerIp, peerTrusted, requestId }),
    serveTime: (res, nowNs, requestId) => writeTime(res, nowNs, requestId, NO_HEADERS),
    refusing: () => undefined,
    pass({ req, res, log, head, expectContinue, keyOwner, assertion, responseHeaders }, done) {
      const { requestId, keyId } = log;
      if (keyId !== undefined) head.headers.push(KEY_ID_HEADER, keyId);
      if (keyOwner !== undefined) head.headers.push(KEY_OWNER_HEADER, keyOwner);
      if (assertion !== undefined) head.headers.push(ASSERTION_HEADER, assertion);
      // Only a request about to be forwarded is told to send its body (see the checkContinue listener).
      if (expectContinue) res.writeContinue();
      const sent = performance.now();
      forwarder.forward(
        { req, res, path: req.url as string, headers: head.headers, body: head.body, requestId, responseHeaders },
        (outcome) => done(outcome, roundMs(performance.now() - sent)),
      );
    },
  };
}
