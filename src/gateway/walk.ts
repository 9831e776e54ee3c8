// Tested in test/adversarial/request-path.test.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PUBLIC, type OK } from '../observe/metrics.js';
import type { RequestLog } from '../observe/request-record.js';
import type { RequestSpan } from '../observe/tracer.js';
import type { Denial } from '../errors.js';
import type { Authenticated, RateLimited } from '../pipeline/authenticate.js';
import type { IpTurn } from '../pipeline/ip-budget.js';
import type { Methods } from '../pipeline/check-override.js';
import type { Target } from '../pipeline/check-target.js';
import type { UpstreamHead } from '../pipeline/forward-headers.js';
import type { KeyRecord } from '../keys/key-record.js';
import type { RouteMatch } from '../policy/routes.js';
import type { OriginalRequest, PassArgs } from './gateway-mode.js';
import type { ForwardOutcome } from './upstream/upstream-exchange.js';
import type { RequestPlan } from './request-plan.js';

/** Replaced by buildUpstreamHead before any pass; frozen, so a step out of order throws (500) rather than forwards. */
const UNBUILT: UpstreamHead = Object.freeze({
  ok: true,
  headers: Object.freeze([]) as unknown as string[],
  body: 'none',
});
const NO_METHODS: Methods['methods'] = [''];

/**
 * One request on its walk along the request path: what the steps learn, in the
 * order they learn it. A class, so every request has the same shape (V8 keeps
 * the step functions monomorphic).
 */
export class Walk implements PassArgs {
  peer = '';
  peerTrusted = false;
  asked: OriginalRequest | undefined = undefined;
  target: Target | undefined = undefined;
  method = '';
  methods: Methods['methods'] = NO_METHODS;
  api = false;
  isPublic = false;
  route: RouteMatch | undefined = undefined;
  head: UpstreamHead = UNBUILT;
  ip: string | undefined = undefined;
  /** The request's turn among its IP's requests in authentication (pipeline/ip-budget.ts); none while the budget is off. */
  ipTurn: IpTurn | undefined = undefined;
  /** The authentication's outcome while the request waits for its IP's earlier requests (request-path.ts). */
  authn: Authenticated | Denial | RateLimited | undefined = undefined;
  /** Sent upstream as X-Api-Key-Owner (pass arguments); not a request-line field, so never logged. */
  keyOwner: string | undefined = undefined;
  /** The authenticated key's record, for the assertion's claims; none on a public route. */
  keyRecord: KeyRecord | undefined = undefined;
  /** Which of the key's credentials verified the token (a stream ends with it); none on a public route. */
  credential: string | undefined = undefined;
  /** X-Keygate-Assertion for a pass (when the assertion is on and a key passed). */
  assertion: string | undefined = undefined;
  /** The token's body_sha256 when the body is read and checked before forwarding. */
  bodySha256: string | undefined = undefined;
  /** Keygate's own response headers (RateLimit) for a pass, [name, value, …]. */
  responseHeaders: readonly string[] | undefined = undefined;
  /** Public or authenticated: what a pass is recorded as (set by the request path's `pass`). */
  passCode: typeof OK | typeof PUBLIC = PUBLIC;
  /** The request's SERVER span; always undefined while tracing is off. */
  span: RequestSpan | undefined = undefined;
  constructor(
    readonly req: IncomingMessage,
    readonly res: ServerResponse,
    readonly log: RequestLog,
    readonly started: number,
    readonly expectContinue: boolean,
    /** The policy in force when the request arrived, as compiled for the path (request-plan.ts). */
    readonly plan: RequestPlan,
    /** What became of a pass: one function for every request of the path, given the walk (no closure per request). */
    private readonly afterPass: (w: Walk, outcome: ForwardOutcome, upstreamMs: number | undefined) => void,
  ) {}

  /** The store's admit begins (authenticate.ts): only then is there a round trip for a CLIENT span to stand for. */
  admitting(): void {
    if (this.span !== undefined) this.span.startAdmit();
  }

  passed(outcome: ForwardOutcome, upstreamMs?: number): void {
    this.afterPass(this, outcome, upstreamMs);
  }
}
