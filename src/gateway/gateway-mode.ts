// Tested in test/unit/forward-auth-mode.test.ts, test/e2e/forward-auth.test.ts, test/e2e/forwarding.test.ts (both modes behind this interface).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Denial, ErrorCode } from '../errors.js';
import type { UpstreamHead } from '../pipeline/forward-headers.js';
import type { KeyRecord } from '../keys/key-record.js';
import type { RouteMatch } from '../policy/routes.js';
import type { ForwardOutcome } from './upstream/upstream-exchange.js';
import type { RequestSpan } from '../observe/tracer.js';

/** The request to check: the one received (proxy), or the one the asking proxy describes (forward-auth). */
export interface OriginalRequest {
  readonly ok: true;
  readonly method: string | undefined;
  readonly url: string | undefined;
}

/** What `pass` is given once every check has passed (the request's Walk). */
export interface PassArgs {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The request's id, and the authenticated key's id (none on a public route: no key, so no identity). */
  readonly log: { readonly requestId: string; readonly keyId?: string | undefined };
  readonly head: UpstreamHead;
  readonly expectContinue: boolean;
  /** The authenticated key's owner (X-Api-Key-Owner); carried here because it is never logged. */
  readonly keyOwner: string | undefined;
  /** The request's SERVER span while tracing is on (streams keep it open for their life). */
  readonly span: RequestSpan | undefined;
  /** X-Keygate-Assertion (a compact JWS) when the assertion is on and a key passed; never on a public route. */
  readonly assertion: string | undefined;
  /** Keygate's own response headers (RateLimit), [name, value, …]. */
  readonly responseHeaders: readonly string[] | undefined;
  /** The token's body_sha256 when the body must be read and checked before it is forwarded. */
  readonly bodySha256: string | undefined;
  // Streams (upgrade-path.ts): what a stream is re-authorized against while it stays open.
  /** The route matched (its `upgrade` and scopes). */
  readonly route: RouteMatch | undefined;
  /** The caller's IP as authorization read it (checked against the key's allow-list). */
  readonly ip: string | undefined;
  /** The authenticated key's record; none on a public route. */
  readonly keyRecord: KeyRecord | undefined;
  /** The credential (VerifyKey.id) that verified the token: a stream is closed once its key no longer holds it. */
  readonly credential: string | undefined;
  /**
   * Called once per pass with what became of it; `upstreamMs` only when something was forwarded. A
   * method of the request's own object (never a closure made per request).
   */
  passed(outcome: ForwardOutcome, upstreamMs?: number): void;
}

/**
 * Everything that differs between proxy and forward-auth mode, chosen once when
 * the gateway is built (request-path.ts never asks which mode it runs in).
 */
export interface GatewayMode {
  /** Whether a pass sends the request upstream (proxy mode, streams): it then carries Keygate's trace context. */
  readonly forwards: boolean;
  /**
   * A request this mode answers outside the request path, unrecorded; true when it did.
   * Forward-auth: nginx asking for the body of a refusal already recorded.
   */
  preempt(req: IncomingMessage, res: ServerResponse, peerTrusted: (req: IncomingMessage) => boolean): boolean;
  /** The request to check, or a refusal. */
  original(req: IncomingMessage, peerTrusted: boolean): OriginalRequest | Denial;
  /** Built before authentication (a refusal here burns no nonce): what would go upstream. */
  upstreamHead(raw: string[], peerIp: string, peerTrusted: boolean, requestId: string): UpstreamHead | Denial;
  /** Every check passed: forward, or tell the asking proxy; then `args.passed` with the outcome. */
  pass(args: PassArgs): void;
  /**
   * GET/HEAD /api/v3/time while the policy serves it: proxy mode writes the answer; forward-auth
   * writes it too, or, where the asking proxy relays only refusals (nginx), defers it to the render step.
   */
  serveTime(res: ServerResponse, nowNs: bigint, requestId: string): void;
  /** Adapts a refusal about to be rendered (headers on `res`); returns the status to answer with, if not the catalogue's. */
  refusing(res: ServerResponse, code: ErrorCode): number | undefined;
}
