// Tested in test/e2e/forwarding.test.ts, test/e2e/create-gateway.test.ts, test/adversarial/smuggling.test.ts.
import type { IncomingMessage } from 'node:http';
import { forwardHeaders, KEY_ID_HEADER, KEY_OWNER_HEADER } from '../pipeline/forward-headers.js';
import { ASSERTION_HEADER } from '../assertion/assertion-signer.js';
import { declaredTooLarge, readBoundBody } from './bound-body.js';
import type { Limits } from '../config/read-limits.js';
import type { Forwarder } from './upstream/forwarder.js';
import type { GatewayMode, OriginalRequest } from './gateway-mode.js';
import { writeTime } from './time-endpoint.js';

const NO_HEADERS: readonly string[] = Object.freeze([]);

/**
 * Proxy mode (KEYGATE_MODE=proxy): the request checked is the one received, and
 * a pass forwards it to the upstream with the key's identity added. A body bound by the token's
 * body_sha256 is read whole (up to `boundBodyMaxBytes`) and checked first; every other
 * body streams through as it arrives.
 */
export function createProxyMode(
  forwarder: Forwarder,
  limits: Pick<Limits, 'boundBodyMaxBytes' | 'minBodyBytesPerSecond' | 'bodyRateGraceMs'>,
): GatewayMode {
  const bodyLimits = {
    maxBytes: limits.boundBodyMaxBytes,
    minBytesPerSecond: limits.minBodyBytesPerSecond,
    graceMs: limits.bodyRateGraceMs,
  };
  return {
    forwards: true,
    preempt: () => false,
    original: (req: IncomingMessage): OriginalRequest => ({ ok: true, method: req.method, url: req.url }),
    upstreamHead: (raw, peerIp, peerTrusted, requestId) => forwardHeaders(raw, { peerIp, peerTrusted, requestId }),
    serveTime: (res, nowNs, requestId) => writeTime(res, nowNs, requestId, NO_HEADERS),
    refusing: () => undefined,
    // The pass reads the request's own object (its Walk) in place and the forwarder reports back through
    // its `passed` method: no argument object and no callback closure per request.
    pass(args) {
      const { req, res, log, head, expectContinue, keyOwner, assertion, bodySha256 } = args;
      const keyId = log.keyId;
      if (keyId !== undefined) head.headers.push(KEY_ID_HEADER, keyId);
      if (keyOwner !== undefined) head.headers.push(KEY_OWNER_HEADER, keyOwner);
      if (assertion !== undefined) head.headers.push(ASSERTION_HEADER, assertion);
      // Nothing to read first (no body_sha256; authentication already checked a bodiless one).
      if (bodySha256 === undefined || head.body === 'none' || head.body === 0) {
        // Only a request about to be forwarded is told to send its body (see the checkContinue listener).
        if (expectContinue) res.writeContinue();
        return forwarder.forward(args, undefined);
      }
      // Declared too large: refused before the client is asked for it.
      if (declaredTooLarge(head.body, limits.boundBodyMaxBytes)) return args.passed({ reason: 'bound_body_too_large' });
      if (expectContinue) res.writeContinue();
      readBoundBody(req, bodyLimits, (body) => {
        // The client went away (or KEYGATE_REQUEST_TIMEOUT_MS cut it): nobody to answer; recorded as aborted.
        if (!body.ok) return body.reason === 'aborted' ? void res.destroy() : args.passed({ reason: body.reason });
        // The nonce was admitted (authenticate.ts): it stays used, and nothing is forwarded.
        if (body.sha256 !== bodySha256) return args.passed({ reason: 'binding_mismatch' });
        forwarder.forward(args, body.bytes);
      });
    },
  };
}
