import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { ipAllowed, normalizeIp } from '../net/cidr.js';
import type { Config } from '../config/load-config.js';
import { API_PREFIX, TIME_PATH, type Policy } from '../policy/policy.js';
import { findRoute } from '../policy/find-route.js';
import { isUnderPrefix } from '../policy/routes.js';
import { deny, ERRORS, type Denial, type ErrorCode, type Reason } from '../errors.js';
import { createRequestLogger } from '../observe/logger.js';
import { OK, PUBLIC, TIME, statusClass, type Metrics } from '../observe/metrics.js';
import type { Authenticated, Authenticator, RateLimited } from '../pipeline/authenticate.js';
import { authorize } from '../pipeline/authorize.js';
import { checkOverride } from '../pipeline/check-override.js';
import { checkTarget } from '../pipeline/check-target.js';
import { clientIp } from '../net/client-ip.js';
import {
  forwardHeaders,
  KEY_ID_HEADER,
  KEY_OWNER_HEADER,
  requestIdOf,
  type UpstreamHead,
} from '../pipeline/forward-headers.js';
import { StoreUnavailableError } from '../store/store.js';
import type { ForwardAuth } from './forward-auth.js';
import type { ForwardOutcome, Forwarder } from './forwarder.js';
import { allowedHeaders, limitedHeaders } from './rate-limit-headers.js';
import { renderError, renderRawError } from './render.js';
import { serverTimeouts } from '../config/server-timeouts.js';
import { SERVER_TIME_HEADER, writeTimeAnswer } from './time-answer.js';

export { SERVER_TIME_HEADER } from './time-answer.js';

export interface GatewayDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly authenticate: Authenticator;
  /** Exactly one: the forwarder (proxy mode) or the forward-auth answers (KEYGATE_MODE=forward-auth). */
  readonly forwarder?: Forwarder;
  readonly forwardAuth?: ForwardAuth;
  /** The policy in force (it reloads without a restart): read once per request. */
  readonly policy: () => Policy;
}

/**
 * Per-request facts: the outcome, the one log line and the metrics, all
 * written once when the response closes. Never the token.
 */
interface RequestLog {
  requestId: string;
  method: string | undefined;
  route: string | undefined;
  clientIp: string | undefined;
  keyId?: string;
  /** Sent upstream as X-Api-Key-Owner; not a request-line field (REQUEST_LINE_FIELDS), so never logged. */
  keyOwner?: string | undefined;
  code?: ErrorCode | typeof OK | typeof PUBLIC | typeof TIME;
  reason?: Reason;
  status?: number;
  authMs?: number;
  upstreamMs?: number;
  durationMs?: number;
  aborted?: true;
}

/**
 * The proxy port. Every request walks the same steps:
 *   header count → check target → public route? (outside /api/v3/: or 404; under it: only the
 *   policy's opt-ins) → upstream head (framing, identity headers) → [public: forward, no identity]
 *   → authenticate → authorize → forward.
 * Each step returns a verdict; a refusal is rendered by `refuse`. Anything
 * thrown on the way is caught by one boundary (`internalError`: 500 50000),
 * and the process keeps serving. The outcome is recorded once, in `record`.
 *
 * Forward-auth mode walks the same steps on the request the asking proxy
 * describes (`forwardAuth.original`), and `pass` answers 200 instead of forwarding.
 */
export function createGateway(config: Config, deps: GatewayDeps): Server {
  const { logger, metrics, forwarder, forwardAuth } = deps;
  if ((forwarder === undefined) === (forwardAuth === undefined))
    throw new Error('createGateway: pass exactly one of forwarder (proxy mode) and forwardAuth');
  const { limits } = config;
  const bound = metrics.bound;
  const trusted = (policy: Policy, peer: string) =>
    policy.trustedProxies !== null && ipAllowed(policy.trustedProxies, peer);

  const server = createServer({
    ...serverTimeouts(limits),
    // Refuse ambiguous framing instead of guessing (CL+TE, bare LF, obs-fold...).
    insecureHTTPParser: false,
    joinDuplicateHeaders: false,
  });
  // Node keeps parsing past this many header fields (the framing still applies) but stops
  // reporting them in req.headers. One more than the limit is kept, so a request at the
  // limit is seen whole and one past it is refused (431) rather than half-read.
  server.maxHeadersCount = limits.maxHeaderCount + 1;
  const requestLogger = createRequestLogger(logger);
  /** Sockets on which Keygate answered "Connection: close". */
  const closing = new WeakSet<Socket>();
  server.on(
    'request',
    forwardAuth ? (req, res) => renderOrBegin(forwardAuth, req, res) : (req, res) => begin(req, res, false),
  );
  // With this listener Node does not answer "100 Continue" on its own: only a
  // request that is about to be forwarded is told to send its body.
  server.on('checkContinue', (req, res) => begin(req, res, true));
  // Node hands CONNECT to this event, never to 'request'; unheard, it drops the socket without a word.
  // There is deliberately no 'upgrade' listener: without one, Node 20 passes an Upgrade request to
  // 'request' like any other, so it is authenticated and forwarded as plain HTTP (Upgrade is hop-by-hop).
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => socket.destroy());
    refuseRaw(socket, 'bad_target', { method: req.method, clientIp: normalizeIp(socket.remoteAddress ?? '') });
  });
  server.on('clientError', (err: Error & { code?: string }, socket: Socket) => {
    // A reset or a socket already answering another request: nothing can be said on it.
    if (
      err.code === 'ECONNRESET' ||
      !socket.writable ||
      (socket as { _httpMessage?: ServerResponse })._httpMessage?.headersSent
    )
      return socket.destroy();
    const reason: Reason =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? 'headers_too_large'
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? 'request_timeout'
          : 'bad_request';
    // The parser's error code, never its raw bytes.
    refuseRaw(socket, reason, { clientIp: normalizeIp(socket.remoteAddress ?? ''), parserError: err.code });
  });

  /**
   * Forward-auth: after a refusal nginx asks (error_page) for the body its auth_request dropped.
   * The refusal was recorded by the check itself; this only renders it, so it is not recorded again.
   */
  function renderOrBegin(fa: ForwardAuth, req: IncomingMessage, res: ServerResponse) {
    const code = fa.renderCode(req);
    if (code === undefined || !trusted(deps.policy(), normalizeIp(req.socket.remoteAddress ?? '')))
      return begin(req, res, false);
    try {
      fa.render(res, code, requestIdOf(req.headers['x-request-id']), () => deps.clock.nowNs().toString());
    } catch {
      res.destroy();
    }
  }

  /** Refusals with no ServerResponse (CONNECT, parser errors): same record, written to the socket. */
  function refuseRaw(socket: Socket, reason: Reason, fields: Record<string, unknown>) {
    const { code } = deny(reason);
    const log = { ...fields, code, reason, status: renderRawError(socket, code) };
    record(log as RequestLog);
  }

  /** The one place an outcome becomes metrics and a log line. */
  function record(log: RequestLog) {
    bound.requests.get(String(log.code))?.inc();
    if (log.reason !== undefined) bound.rejections[log.reason].inc();
    if (log.upstreamMs !== undefined) {
      const cls =
        log.code === OK || log.code === PUBLIC
          ? statusClass(log.status ?? 0)
          : log.reason === 'upstream_timeout'
            ? 'timeout'
            : 'error';
      bound.upstreamSeconds.get(cls)?.observe(log.upstreamMs / 1000);
    }
    // warn: Keygate answered an error code (a number; the outcome labels are strings) with a 5xx status.
    requestLogger(log, typeof log.code === 'number' && (log.status ?? 0) >= 500);
  }

  function begin(req: IncomingMessage, res: ServerResponse, expectContinue: boolean) {
    const started = performance.now();
    // Admission control, before any other work: past the bound a request is shed at once
    // with an honest reason, and the requests already admitted keep the CPU they need.
    const shed = metrics.inflight.value >= limits.maxInFlight;
    metrics.inflight.inc();
    const log: RequestLog = {
      requestId: requestIdOf(req.headers['x-request-id']),
      method: req.method,
      route: undefined,
      clientIp: undefined,
    };
    // 'close' is emitted once per response, however it ends. The log object becomes the line: no copy.
    res.once('close', () => {
      metrics.inflight.dec();
      if (log.status === undefined) log.status = res.statusCode;
      log.durationMs = round(performance.now() - started);
      if (!res.writableFinished) log.aborted = true;
      record(log);
    });
    try {
      if (shed) return refuse(res, log, deny('overloaded'));
      handle(req, res, log, started, expectContinue);
    } catch (err) {
      internalError(res, log, err);
    }
  }

  /** The error boundary: whatever threw, the client gets 500 50000 and the process serves on. */
  function internalError(res: ServerResponse, log: RequestLog, err: unknown) {
    logger.error({ err, requestId: log.requestId }, 'internal error while handling a request');
    try {
      refuse(res, log, deny('internal_error'));
    } catch {
      res.destroy();
    }
  }

  function refuse(res: ServerResponse, log: RequestLog, decision: Denial | RateLimited) {
    // A refused request whose body has not all arrived: close rather than read the rest,
    // so nothing after our answer is parsed from it.
    if (!res.req.complete) res.setHeader('connection', 'close');
    if (res.getHeader('connection') === 'close') closing.add(res.req.socket);
    log.code = decision.code;
    log.reason = decision.reason;
    res.setHeader('x-request-id', log.requestId);
    const status = forwardAuth?.refusing(res, decision.code);
    // Logged as the client gets it (after nginx's render step), not as the forced status nginx was sent.
    if (status !== undefined) log.status = ERRORS[decision.code].status;
    const extra =
      decision.reason === 'nonce_window'
        ? { [SERVER_TIME_HEADER]: deps.clock.nowNs().toString() }
        : 'rate' in decision
          ? limitedHeaders(decision.rate)
          : undefined;
    renderError(res, decision.code, extra, status);
  }

  function serveTime(res: ServerResponse, log: RequestLog) {
    const now = deps.clock.nowNs().toString();
    log.code = TIME;
    log.route = TIME_PATH;
    if (forwardAuth) forwardAuth.time(res, now, log.requestId);
    else writeTimeAnswer(res, now, log.requestId);
  }

  /**
   * Every check passed: forward (proxy mode), or tell the asking proxy (forward-auth: 200, nothing forwarded).
   * `outcome`: OK after authentication, PUBLIC on a public route (no key, so no X-Api-Key-Id).
   */
  function pass(
    req: IncomingMessage,
    res: ServerResponse,
    log: RequestLog,
    head: UpstreamHead,
    expectContinue: boolean,
    outcome: typeof OK | typeof PUBLIC,
    responseHeaders?: readonly string[],
  ) {
    if (forwardAuth) {
      log.code = outcome;
      return forwardAuth.allow(res, log.keyId, log.requestId, log.keyOwner, responseHeaders);
    }
    if (log.keyId !== undefined) head.headers.push(KEY_ID_HEADER, log.keyId);
    if (log.keyOwner !== undefined) head.headers.push(KEY_OWNER_HEADER, log.keyOwner);
    if (expectContinue) res.writeContinue();
    const sent = performance.now();
    (forwarder as Forwarder).forward(
      {
        req,
        res,
        path: req.url as string,
        headers: head.headers,
        body: head.body,
        requestId: log.requestId,
        responseHeaders,
      },
      (result: ForwardOutcome) => {
        log.upstreamMs = round(performance.now() - sent);
        if ('status' in result) {
          log.code = outcome;
          log.status = result.status;
        } else {
          refuse(res, log, deny(result.reason));
        }
      },
    );
  }

  function handle(
    req: IncomingMessage,
    res: ServerResponse,
    log: RequestLog,
    started: number,
    expectContinue: boolean,
  ): void {
    // Node parses pipelined requests before the answer to an earlier one is written. Once
    // Keygate has answered "Connection: close" on this socket, what follows is never served.
    if (closing.has(req.socket)) return void res.destroy();
    const raw = req.rawHeaders;
    const peer = normalizeIp(req.socket.remoteAddress ?? '');
    log.clientIp = peer;
    if (raw.length > 2 * limits.maxHeaderCount) {
      res.setHeader('connection', 'close');
      return refuse(res, log, deny('too_many_headers'));
    }
    const policy = deps.policy();
    const peerTrusted = trusted(policy, peer);
    let asked = { method: req.method, url: req.url };
    if (forwardAuth) {
      const original = forwardAuth.original(req, peerTrusted);
      if (!original.ok) return refuse(res, log, original);
      asked = original;
      log.method = original.method;
    }
    const target = checkTarget(asked.method, asked.url);
    if (!target.ok) {
      res.setHeader('connection', 'close');
      return refuse(res, log, target);
    }
    const method = asked.method as string;
    if (target.path === TIME_PATH && (method === 'GET' || method === 'HEAD') && policy.timeEndpoint)
      return serveTime(res, log);

    // Matched once, the way the upstream's router reads the path (case, trailing slash, HEAD as GET, allowed
    // method overrides): the pattern (never the raw path or query) is logged, also on refusals.
    const methods = checkOverride(method, req.headers, target.query, policy.methodOverride);
    if (!methods.ok) return refuse(res, log, methods);
    const api = isUnderPrefix(target.path, API_PREFIX, policy.matching);
    // Public routes first: under /api/v3/ only the operator's opt-ins, which load refused to let overlap `routes`.
    // A public match for only one of two methods (an override) is not public: it is authenticated below.
    const open =
      api && policy.publicApiRoutes.rules.length === 0
        ? undefined
        : findRoute(api ? policy.publicApiRoutes : policy.publicRoutes, methods.methods, target.path);
    const isPublic = open !== undefined && !open.partial;
    const route = api && !isPublic ? findRoute(policy.routes, methods.methods, target.path) : open;
    log.route = route?.pattern;
    // Built before authentication: a request refused here burns no nonce. It never carries the client's
    // Authorization or identity headers, so a public route forwards no identity at all.
    const head = upstreamHead(raw, peer, peerTrusted, log.requestId);
    if (!head.ok) return refuse(res, log, head);

    if (isPublic) return pass(req, res, log, head, expectContinue, PUBLIC);
    if (!api) return refuse(res, log, deny('no_route'));

    const ip = clientIp(
      peer,
      peerTrusted ? headerValue(req.headers['x-forwarded-for']) : undefined,
      policy.trustedProxies,
    );
    log.clientIp = ip;

    const decided = (authn: Authenticated | Denial | RateLimited) => {
      let decision: Denial | RateLimited | undefined;
      if (authn.ok) {
        log.keyId = authn.key.record.id;
        log.keyOwner = authn.key.record.owner;
        const authz = authorize(authn.key, ip, route, policy.unlistedRoutes);
        if (authz.ok) log.route = authz.route;
        else decision = authz;
      } else decision = authn;
      const ms = performance.now() - started;
      log.authMs = round(ms);
      bound.authSeconds[
        decision === undefined ? 'allow' : decision.reason === 'store_unavailable' ? 'error' : 'deny'
      ].observe(ms / 1000);
      if (decision !== undefined) return refuse(res, log, decision);
      // The client went away while we were checking, or an earlier answer closed its connection.
      if (res.destroyed || closing.has(req.socket)) return void res.destroy();
      const rate = (authn as Authenticated).rate;
      pass(req, res, log, head, expectContinue, OK, rate && config.rateLimitHeaders ? allowedHeaders(rate) : undefined);
    };
    deps.authenticate(raw).then(
      (decision) => {
        try {
          decided(decision);
        } catch (err) {
          internalError(res, log, err);
        }
      },
      (err: unknown) => {
        try {
          // Only a store that did not answer is 503; anything else is Keygate's own fault.
          if (!(err instanceof StoreUnavailableError)) throw err;
          decided(deny('store_unavailable'));
        } catch (e) {
          internalError(res, log, e);
        }
      },
    );
  }

  /** The upstream's head; a forward-auth check forwards nothing, so there is none to build. */
  function upstreamHead(raw: string[], peerIp: string, peerTrusted: boolean, requestId: string): UpstreamHead | Denial {
    return forwardAuth ? NOTHING_FORWARDED : forwardHeaders(raw, { peerIp, peerTrusted, requestId });
  }

  return server;
}

const NOTHING_FORWARDED: UpstreamHead = Object.freeze({
  ok: true,
  headers: Object.freeze([]) as unknown as string[],
  body: 'none',
});

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
