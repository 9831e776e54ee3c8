// Tested in test/adversarial/request-path.test.ts, test/repo/lifecycle-doc.test.ts (the steps in lifecycle order).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Limits } from '../config/read-limits.js';
import { deny, type Denial, type Reason } from '../errors.js';
import { clientIp } from '../net/client-ip.js';
import { ipAllowed, normalizeIp } from '../net/cidr.js';
import { budgetPrefix } from '../net/ip-prefix.js';
import { OK, PUBLIC, TIME, type Metrics } from '../observe/metrics.js';
import { createRequestRecorder, roundMs, type RequestLog } from '../observe/request-record.js';
import { withTraceContext, type RequestSpan, type TracerSlot } from '../observe/tracer.js';
import type { Authenticated, Authenticator, RateLimited } from '../pipeline/authenticate.js';
import { spendsIpBudget, type IpBudget } from '../pipeline/ip-budget.js';
import type { AssertionSigner } from '../assertion/assertion-signer.js';
import { authorize } from '../pipeline/authorize.js';
import { checkOverride } from '../pipeline/check-override.js';
import { checkTarget, type Target } from '../pipeline/check-target.js';
import { requestIdOf } from '../pipeline/forward-headers.js';
import { checkHeaders } from '../pipeline/check-headers.js';
import { TIME_PATH, type Policy } from '../policy/policy.js';
import { StoreUnavailableError } from '../store/store.js';
import type { GatewayMode, OriginalRequest } from './gateway-mode.js';
import type { BlockedRequestLog } from './blocked-request-log.js';
import { allowedHeaders } from './rate-limit-headers.js';
import { renderRawError } from './render.js';
import { createRefuser } from './refuser.js';
import { compileRequestPlan } from './request-plan.js';
import type { ForwardOutcome } from './upstream/upstream-exchange.js';
import { Walk } from './walk.js';

/**
 * The steps every request walks, in order: the functions of this file, declared
 * and called in this order, and the rows of docs/reference/lifecycle.md (a unit
 * test holds the three together). `source` is where the step's logic lives.
 * The steps stay in one file, a little over 250 lines, so that the path reads top to bottom in one place.
 */
export const REQUEST_STEPS = Object.freeze([
  { name: 'admit', source: 'src/gateway/request-path.ts' },
  { name: 'screenHeaders', source: 'src/pipeline/check-headers.ts' },
  { name: 'checkIpBudget', source: 'src/pipeline/ip-budget.ts' },
  { name: 'originalRequest', source: 'src/gateway/forward-auth-mode.ts' },
  { name: 'checkRequestTarget', source: 'src/pipeline/check-target.ts' },
  { name: 'serveTime', source: 'src/gateway/request-path.ts' },
  { name: 'checkMethodOverride', source: 'src/pipeline/check-override.ts' },
  { name: 'matchRoute', source: 'src/policy/find-route.ts' },
  { name: 'buildUpstreamHead', source: 'src/pipeline/forward-headers.ts' },
  { name: 'passPublic', source: 'src/gateway/request-path.ts' },
  { name: 'authenticate', source: 'src/pipeline/authenticate.ts' },
  { name: 'spendIpBudget', source: 'src/pipeline/ip-budget.ts' },
  { name: 'authorizeKey', source: 'src/pipeline/authorize.ts' },
  { name: 'pass', source: 'src/gateway/proxy-mode.ts' },
] as const);

export interface RequestPathDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly authenticate: Authenticator;
  /** The policy in force (it reloads without a restart): read once per request. */
  readonly policy: () => Policy;
  readonly mode: GatewayMode;
  /** Signs X-Keygate-Assertion for each pass with a key; absent = the assertion is off. */
  readonly assertion?: AssertionSigner | undefined;
  /**
   * The failed-authentication budget per client IP (policy failedAuthLimit, pipeline/ip-budget.ts): how long
   * an IP is still blocked, the spend of a failed authentication, and the log of its refusals (a summary per
   * IP, not a line each). Absent = never blocked, nothing spent.
   */
  readonly ipBlocks?: (Pick<IpBudget, 'blockedMs' | 'spend'> & { readonly log: BlockedRequestLog }) | undefined;
  /**
   * Tracing: absent while it is off (no OTLP endpoint), and then the path does nothing for it. Its
   * tracer is filled in once the OpenTelemetry packages have loaded, before the port listens.
   */
  readonly tracing?: TracerSlot | undefined;
}

export interface RequestPath {
  /** One request, from the 'request' or 'checkContinue' listener. */
  handle(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): void;
  /** A refusal with no ServerResponse (CONNECT, parser errors): same record, written to the socket. */
  refuseRaw(socket: Socket, reason: Reason, fields: Partial<RequestLog>): void;
}

/**
 * The request path, one named step per function in lifecycle order. Each step
 * either hands on to the next or ends the request with a verdict rendered by
 * `refuse`. Anything thrown is caught by one boundary (`internalError`: 500
 * 50000) and the process serves on; the outcome is recorded once, when the
 * response closes. What differs between proxy and forward-auth is `deps.mode`.
 */
export function createRequestPath(limits: Limits, rateLimitHeaders: boolean, deps: RequestPathDeps): RequestPath {
  const { metrics, mode } = deps;
  const recorder = createRequestRecorder(deps);
  const authSeconds = metrics.bound.authSeconds;
  const { refuse, refuseBlocked, internalError, closing } = createRefuser(deps);
  const { ipBlocks, tracing } = deps;
  /** The policy in force as a plan (request-plan.ts): compiled once per policy, at its first request. */
  let plan = compileRequestPlan(deps.policy());
  const planOf = (policy: Policy) => (policy === plan.policy ? plan : (plan = compileRequestPlan(policy)));

  /** Admission control (overload shed); from here the request is recorded once, when its response closes. */
  function admit(req: IncomingMessage, res: ServerResponse, expectContinue: boolean) {
    const started = performance.now();
    // Past the bound a request is shed before any other work, with an honest reason, so the
    // requests already admitted keep the CPU they need.
    const shed = metrics.inflight.value >= limits.maxInFlight;
    const log = recorder.open(res, requestIdOf(req.headers['x-request-id']), req.method, started);
    // Tracing off: this one branch is all the path spends on it.
    const span = tracing === undefined ? undefined : traced(req, res, log, started);
    try {
      if (shed) return refuse(res, log, deny('overloaded'));
      // Node parses pipelined requests before the answer to an earlier one is written. Once
      // Keygate has answered "Connection: close" on this socket, what follows is never served.
      if (closing.has(req.socket)) return void res.destroy();
      const w = new Walk(req, res, log, started, expectContinue, planOf(deps.policy()), passed);
      if (span !== undefined) {
        w.span = span;
        (res as TracedResponse)[WALK] = w;
      }
      walk(w);
    } catch (err) {
      internalError(res, log, err);
    }
  }

  /**
   * The synchronous steps, in order. Each returns true to hand on to the next, or false once it has
   * answered the request (a refusal, the time endpoint, a public pass). Then `authenticate` → `spendIpBudget` →
   * `authorizeKey` → `pass`, when the store has answered.
   */
  function walk(w: Walk) {
    if (
      screenHeaders(w) &&
      checkIpBudget(w) &&
      originalRequest(w) &&
      checkRequestTarget(w) &&
      serveTime(w) &&
      checkMethodOverride(w) &&
      matchRoute(w) &&
      buildUpstreamHead(w) &&
      passPublic(w)
    )
      authenticate(w);
  }

  /** More header fields than the limit (431, never half-read), or a repeated Host (400): refused whole. */
  function screenHeaders(w: Walk): boolean {
    w.peer = w.log.clientIp = normalizeIp(w.req.socket.remoteAddress ?? '');
    const screened = checkHeaders(w.req.rawHeaders, limits.maxHeaderCount);
    if (screened.ok) return true;
    if (screened.reason === 'too_many_headers') w.res.setHeader('connection', 'close');
    return refuse(w.res, w.log, screened);
  }

  /**
   * The client IP (the peer, or through trustedProxies the first untrusted X-Forwarded-For hop: nothing
   * else of the request) and, while its failed-authentication budget is empty, 429 ip_blocked: before
   * the target is parsed, a route matched or a token read, on every path. Only the first refusal of a
   * run is its own request line; the rest are summed up per IP (blocked-request-log.ts).
   */
  function checkIpBudget(w: Walk): boolean {
    w.peerTrusted = w.plan.trustedProxies !== null && ipAllowed(w.plan.trustedProxies, w.peer);
    const xff = w.peerTrusted ? w.req.headers['x-forwarded-for'] : undefined;
    w.ip = clientIp(w.peer, Array.isArray(xff) ? xff.join(', ') : xff, w.plan.trustedProxies);
    const limit = w.plan.policy.failedAuthLimit;
    if (limit === undefined || ipBlocks === undefined || w.ip === undefined) return true;
    const blockedMs = ipBlocks.blockedMs(w.ip);
    if (blockedMs <= 0) return true;
    w.log.clientIp = w.ip;
    if (!ipBlocks.log.note(budgetPrefix(w.ip))) recorder.unlogged(w.log);
    return refuseBlocked(w.res, w.log, limit, blockedMs);
  }

  /** The request to check: the one received, or (forward-auth) the one the asking proxy describes. */
  function originalRequest(w: Walk): boolean {
    const asked = mode.original(w.req, w.peerTrusted);
    if (!asked.ok) return refuse(w.res, w.log, asked);
    w.log.method = asked.method;
    w.asked = asked;
    return true;
  }

  function checkRequestTarget(w: Walk): boolean {
    const { method, url } = w.asked as OriginalRequest;
    const target = checkTarget(method, url);
    if (!target.ok) {
      w.res.setHeader('connection', 'close');
      return refuse(w.res, w.log, target);
    }
    w.method = method as string;
    w.target = target;
    return true;
  }

  /** GET/HEAD /api/v3/time is answered here (unless the policy turns it off): no token, nothing forwarded. */
  function serveTime(w: Walk): boolean {
    const target = w.target as Target;
    if (target.path !== TIME_PATH || (w.method !== 'GET' && w.method !== 'HEAD') || !w.plan.timeEndpoint) return true;
    w.log.code = TIME;
    w.log.route = TIME_PATH;
    mode.serveTime(w.res, deps.clock.nowNs(), w.log.requestId);
    return false;
  }

  function checkMethodOverride(w: Walk): boolean {
    const target = w.target as Target;
    const methods = checkOverride(w.method, w.req.headers, target.query, w.plan.methodOverride);
    if (!methods.ok) return refuse(w.res, w.log, methods);
    w.methods = methods.methods;
    return true;
  }

  /**
   * Matched once, the way the upstream's router reads the path (case, trailing slash, HEAD as GET, allowed
   * method overrides): the pattern (never the raw path or query) is logged, also on refusals. What the
   * route needs (public or authenticated, its scopes and cost) was decided when the plan was compiled.
   */
  function matchRoute(w: Walk): boolean {
    const decision = w.plan.decide(w.methods, (w.target as Target).path);
    w.api = decision.api;
    w.isPublic = decision.isPublic;
    w.route = decision.route;
    w.log.route = decision.route?.pattern;
    return true;
  }

  /**
   * Built before authentication, so a request refused here burns no nonce. It never carries the client's
   * Authorization or identity headers, so a public route forwards no identity at all.
   */
  function buildUpstreamHead(w: Walk): boolean {
    const head = mode.upstreamHead(w.req.rawHeaders, w.peer, w.peerTrusted, w.log.requestId);
    if (!head.ok) return refuse(w.res, w.log, head);
    w.head = head;
    return true;
  }

  /** A public route passes with no key; outside /api/v3/ anything else is not ours to answer. */
  function passPublic(w: Walk): boolean {
    if (w.isPublic) {
      pass(w, PUBLIC);
      return false;
    }
    if (!w.api) return refuse(w.res, w.log, deny('no_route'));
    return true;
  }

  function authenticate(w: Walk) {
    w.log.clientIp = w.ip; // derived by checkIpBudget
    if (w.span !== undefined) w.span.startAdmit();
    // The walk is the request's route (its cost) and client IP as the authenticator reads them.
    let authn: ReturnType<Authenticator>;
    try {
      authn = deps.authenticate(w.req.rawHeaders, w);
    } catch (err) {
      return authenticationFailed(w, err);
    }
    // A cached key on the embedded store is decided at once: carried on in this same turn.
    if (!(authn instanceof Promise)) return spendIpBudget(w, authn);
    authn.then(
      (a) => spendIpBudget(w, a),
      (err: unknown) => authenticationFailed(w, err),
    );
  }

  /** Only a store that did not answer is 503; anything else is Keygate's own fault. */
  function authenticationFailed(w: Walk, err: unknown) {
    if (err instanceof StoreUnavailableError) authorized(w, deny(err.reason));
    else internalError(w.res, w.log, err);
  }

  /**
   * A refusal that says the token or its key was bad (spendsIpBudget: a credential was presented) spends 1 from the client IP's
   * failed-authentication budget, in the store every instance shares, and is answered once the spend is
   * made: the next request, on any instance, finds it spent. Anything else goes on at once.
   */
  function spendIpBudget(w: Walk, authn: Authenticated | Denial | RateLimited) {
    const limit = w.plan.policy.failedAuthLimit;
    if (authn.ok || limit === undefined || ipBlocks === undefined || w.ip === undefined || !spendsIpBudget(authn))
      return authorized(w, authn);
    ipBlocks.spend(w.ip, limit).then(
      () => authorized(w, authn),
      (err: unknown) => internalError(w.res, w.log, err),
    );
  }

  /** The error boundary of the path's asynchronous half. */
  function authorized(w: Walk, authn: Authenticated | Denial | RateLimited) {
    if (w.span !== undefined) w.span.endAdmit(!authn.ok && authn.reason === 'store_unavailable');
    try {
      authorizeKey(w, authn);
    } catch (err) {
      internalError(w.res, w.log, err);
    }
  }

  function authorizeKey(w: Walk, authn: Authenticated | Denial | RateLimited) {
    let decision: Denial | RateLimited | undefined;
    if (authn.ok) {
      w.log.keyId = authn.key.record.id;
      w.keyOwner = authn.key.record.owner;
      w.keyRecord = authn.key.record;
      w.credential = authn.credential;
      const authz = authorize(authn.key, w.ip, w.route, w.plan.unlistedRoutes);
      if (authz.ok) w.log.route = authz.route;
      else {
        decision = authz;
        // docs/running.md: a request no route lists is logged as route "unlisted", refused or not.
        if (authz.reason === 'route_not_listed') w.log.route = 'unlisted';
      }
    } else {
      decision = authn;
      // Refused after the signature verified (replay, fenced, rate limited): the key is known, and logged.
      if ('keyId' in authn) w.log.keyId = authn.keyId;
    }
    const ms = performance.now() - w.started;
    w.log.authMs = roundMs(ms);
    authSeconds[decision === undefined ? 'allow' : decision.reason === 'store_unavailable' ? 'error' : 'deny'].observe(
      ms / 1000,
      w.log.exemplar,
    );
    if (decision !== undefined) return refuse(w.res, w.log, decision);
    metrics.bound.admittedTokens[(authn as Authenticated).alg].inc();
    // The client went away while we were checking, or an earlier answer closed its connection.
    if (w.res.destroyed || closing.has(w.req.socket)) return void w.res.destroy();
    const { rate, bodySha256 } = authn as Authenticated;
    w.bodySha256 = bodySha256;
    if (rate && rateLimitHeaders) w.responseHeaders = allowedHeaders(rate);
    pass(w, OK);
  }

  /**
   * Every check passed: the mode forwards (proxy) or answers the asking proxy (forward-auth). The assertion
   * is signed here, once for both modes, over the request as checked (and as forwarded): its method and target.
   */
  function pass(w: Walk, outcome: typeof OK | typeof PUBLIC) {
    if (deps.assertion !== undefined && w.keyRecord !== undefined) {
      const target = (w.asked as OriginalRequest).url as string;
      w.assertion = deps.assertion.sign(w.keyRecord, { requestId: w.log.requestId, method: w.method, target });
    }
    w.passCode = outcome;
    // Traced: the upstream gets Keygate's trace context in place of the client's (its parent is Keygate's span).
    if (w.span !== undefined && mode.forwards) {
      const target = w.target as Target;
      withTraceContext(w.head.headers, w.span.startUpstream(w.method, target.path));
    }
    // The mode reports back through `w.passed`, which hands the walk to `passed` below.
    mode.pass(w);
  }

  /** What became of a pass (the mode calls it once, through the walk): recorded, or refused with the reason. */
  function passed(w: Walk, result: ForwardOutcome, upstreamMs: number | undefined) {
    const log = w.log;
    if (upstreamMs !== undefined) log.upstreamMs = upstreamMs;
    if (w.span !== undefined)
      w.span.endUpstream(
        'status' in result ? result.status : undefined,
        'reason' in result ? result.reason : undefined,
      );
    if ('status' in result) {
      log.code = w.passCode;
      log.status = result.status;
    } else {
      if (result.cause !== undefined) log.upstreamCause = result.cause;
      const denial = deny(result.reason);
      // Every 40106 spends from the client IP's failed-authentication budget, this one too (a body that
      // does not match body_sha256 is found only once the body has been read), under the policy now in force.
      const limit = deps.policy().failedAuthLimit;
      if (result.reason === 'binding_mismatch' && limit !== undefined && ipBlocks !== undefined && w.ip !== undefined)
        return void ipBlocks
          .spend(w.ip, limit)
          .then(() => refuse(w.res, log, denial))
          .catch((err: unknown) => internalError(w.res, log, err));
      refuse(w.res, log, denial);
    }
  }

  /**
   * Tracing on: the request's SERVER span, its ids on the request line, and its end when the response
   * closes (after the recorder's own 'close' listener has completed the log).
   */
  function traced(
    req: IncomingMessage,
    res: ServerResponse,
    log: RequestLog,
    started: number,
  ): RequestSpan | undefined {
    const tracer = (tracing as TracerSlot).tracer;
    if (tracer === undefined) return undefined;
    const span = tracer.startServer(req, started);
    log.trace_id = span.traceId;
    log.span_id = span.spanId;
    if (span.sampled) log.exemplar = span.traceId;
    const t = res as TracedResponse;
    t[SPAN] = span;
    t[SPAN_LOG] = log;
    res.on('close', spanClosed);
    return span;
  }

  return {
    handle: admit,
    refuseRaw(socket, reason, fields) {
      const { code } = deny(reason);
      const log = { ...fields, code, reason, status: renderRawError(socket, code) };
      recorder.record(log as RequestLog);
    },
  };
}

const SPAN = Symbol('requestSpan');
const SPAN_LOG = Symbol('requestSpanLog');
const WALK = Symbol('requestWalk');
type TracedResponse = ServerResponse & { [SPAN]?: RequestSpan; [SPAN_LOG]?: RequestLog; [WALK]?: Walk };

/** One 'close' listener for every traced response (no closure per request): the span ends with the outcome. */
function spanClosed(this: ServerResponse) {
  const t = this as TracedResponse;
  const log = t[SPAN_LOG] as RequestLog;
  const w = t[WALK];
  (t[SPAN] as RequestSpan).end({
    method: log.method,
    route: log.route,
    path: w?.target?.path,
    status: log.status,
    code: log.code,
    reason: log.reason,
    keyId: log.keyId,
    owner: w?.keyOwner,
    cost: w?.route?.cost,
    clientIp: log.clientIp,
  });
}
