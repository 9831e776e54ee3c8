import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { ipAllowed, normalizeIp } from '../config/cidr.js';
import type { Config } from '../config/load-config.js';
import { findRoute, isUnderPrefix } from '../config/routes.js';
import { ERRORS, type Denial, type ErrorCode, type Reason } from '../errors.js';
import { createRequestLogger } from '../observe/logger.js';
import { OK, TIME, statusClass, type Metrics } from '../observe/metrics.js';
import type { Authenticator } from '../pipeline/authenticate.js';
import { authorize } from '../pipeline/authorize.js';
import { checkOverride } from '../pipeline/check-override.js';
import { checkTarget } from '../pipeline/check-target.js';
import { clientIp } from '../pipeline/client-ip.js';
import { mutateHeaders, requestIdOf } from '../pipeline/mutate-headers.js';
import { StoreUnavailableError } from '../store/types.js';
import type { Forwarder } from './forwarder.js';
import { renderError, renderRawError } from './render.js';

const API_PREFIX = '/api/v3/';
/** Served by Keygate itself, without authentication, so clients can measure their clock drift. */
export const TIME_PATH = '/api/v3/time';
/** On every 40106 caused by the nonce window: the server's time in nanoseconds. */
export const SERVER_TIME_HEADER = 'x-server-time';

export interface GatewayDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly authenticate: Authenticator;
  readonly forwarder: Forwarder;
}

/** Per-request facts for the one log line and the metrics. Never the token. */
interface RequestLog {
  requestId: string;
  method: string | undefined;
  route: string | undefined;
  clientIp: string | undefined;
  keyId?: string;
  code?: ErrorCode | typeof OK | typeof TIME;
  reason?: Reason;
  status?: number;
  authMs?: number;
  upstreamMs?: number;
  durationMs?: number;
  aborted?: true;
}

/**
 * The proxy port. Every request walks the same steps:
 *   check target → (outside /api/v3/: public route or 404)
 *   → authenticate → authorize → mutate headers → forward.
 */
export function createGateway(config: Config, deps: GatewayDeps): Server {
  const { logger, metrics, forwarder } = deps;
  const { policy, limits } = config;

  const server = createServer({
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // headersTimeout/requestTimeout are only enforced when this timer runs (Node's default: every 30 s).
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
    // Refuse ambiguous framing instead of guessing (CL+TE, bare LF, obs-fold...).
    insecureHTTPParser: false,
    joinDuplicateHeaders: false,
  });
  const requestLogger = createRequestLogger(logger);
  server.on('request', (req, res) => void handle(req, res, false));
  // With this listener Node does not answer "100 Continue" on its own: only a
  // request that is about to be forwarded is told to send its body.
  server.on('checkContinue', (req, res) => void handle(req, res, true));
  // Node hands CONNECT to this event, never to 'request'; unheard, it drops the socket without a word.
  // There is deliberately no 'upgrade' listener: without one, Node 20 passes an Upgrade request to
  // 'request' like any other, so it is authenticated and forwarded as plain HTTP (Upgrade is hop-by-hop).
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => socket.destroy());
    refuseRaw(socket, 40000, 'bad_target', { method: req.method, clientIp: normalizeIp(socket.remoteAddress ?? '') });
  });
  server.on('clientError', (err: Error & { code?: string }, socket: Socket) => {
    // A reset or a socket already answering another request: nothing can be said on it.
    if (err.code === 'ECONNRESET' || !socket.writable || (socket as { _httpMessage?: ServerResponse })._httpMessage?.headersSent) return socket.destroy();
    const code: ErrorCode = err.code === 'HPE_HEADER_OVERFLOW' ? 43100 : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 40800 : 40000;
    const reason: Reason = code === 43100 ? 'headers_too_large' : code === 40800 ? 'request_timeout' : 'bad_request';
    // The parser's error code, never its raw bytes.
    refuseRaw(socket, code, reason, { clientIp: normalizeIp(socket.remoteAddress ?? ''), parserError: err.code });
  });

  /** Refusals with no ServerResponse (CONNECT, parser errors): same metrics and one log line, written to the socket. */
  function refuseRaw(socket: Socket, code: ErrorCode, reason: Reason, fields: Record<string, unknown>) {
    metrics.requests.inc({ code: String(code) });
    metrics.rejections.inc({ code: String(code), reason });
    requestLogger.info({ ...fields, code, reason, status: ERRORS[code].status }, 'request');
    renderRawError(socket, code);
  }

  function finish(res: ServerResponse, log: RequestLog, started: number) {
    // 'close' is emitted once per response. The log object becomes the line: no copy.
    res.on('close', () => {
      metrics.inflight.dec();
      log.status = res.statusCode;
      log.durationMs = round(performance.now() - started);
      if (!res.writableFinished) log.aborted = true;
      if (log.code !== undefined && log.code !== OK && log.status >= 500) requestLogger.warn(log, 'request');
      else requestLogger.info(log, 'request');
    });
  }

  function refuse(res: ServerResponse, log: RequestLog, decision: Denial) {
    // A refused request whose body has not all arrived: close rather than read the rest,
    // so nothing after our answer is parsed from it.
    if (!res.req.complete) res.setHeader('connection', 'close');
    log.code = decision.code;
    log.reason = decision.reason;
    metrics.requests.inc({ code: String(decision.code) });
    metrics.rejections.inc({ code: String(decision.code), reason: decision.reason });
    renderError(res, decision.code, decision.reason === 'nonce_window' ? { [SERVER_TIME_HEADER]: deps.clock.nowNs().toString() } : undefined);
  }

  function serveTime(res: ServerResponse, log: RequestLog) {
    const now = deps.clock.nowNs().toString();
    log.code = TIME;
    log.route = TIME_PATH;
    metrics.requests.inc({ code: TIME });
    const body = `{"serverTime":"${now}"}`;
    res.setHeader('content-type', 'application/json');
    res.setHeader('cache-control', 'no-store');
    res.setHeader(SERVER_TIME_HEADER, now);
    res.setHeader('content-length', Buffer.byteLength(body));
    res.end(body);
  }

  function forward(req: IncomingMessage, res: ServerResponse, log: RequestLog, expectContinue: boolean) {
    if (expectContinue) res.writeContinue();
    const sent = performance.now();
    forwarder.forward(req, res, (outcome) => {
      const seconds = (performance.now() - sent) / 1000;
      log.upstreamMs = round(seconds * 1000);
      if ('status' in outcome) {
        log.code = OK;
        metrics.requests.inc({ code: OK });
        metrics.upstreamSeconds.observe({ status_class: statusClass(outcome.status) }, seconds);
      } else {
        metrics.upstreamSeconds.observe({ status_class: outcome.code === 50400 ? 'timeout' : 'error' }, seconds);
        refuse(res, log, { ok: false, code: outcome.code, reason: outcome.code === 50400 ? 'upstream_timeout' : 'upstream_error' });
      }
    });
  }

  async function handle(req: IncomingMessage, res: ServerResponse, expectContinue: boolean): Promise<void> {
    const started = performance.now();
    metrics.inflight.inc();
    const requestId = requestIdOf(req.headers);
    const peer = normalizeIp(req.socket.remoteAddress ?? '');
    const log: RequestLog = { requestId, method: req.method, route: undefined, clientIp: peer };
    res.setHeader('x-request-id', requestId);
    finish(res, log, started);

    const target = checkTarget(req.method, req.url);
    if (!target.ok) {
      res.setHeader('connection', 'close');
      return refuse(res, log, target);
    }
    const method = req.method as string;
    if (target.path === TIME_PATH && (method === 'GET' || method === 'HEAD')) return serveTime(res, log);
    const peerTrusted = policy.trustedProxies !== null && ipAllowed(policy.trustedProxies, peer);

    // Matched once, the way the upstream's router reads the path (case, trailing slash, HEAD as GET, allowed
    // method overrides): the pattern (never the raw path or query) is logged, also on refusals.
    const methods = checkOverride(method, req.headers, target.query, policy.methodOverride);
    if (!methods.ok) return refuse(res, log, methods);
    const api = isUnderPrefix(target.path, API_PREFIX, policy.matching);
    const route = findRoute(api ? policy.routes : policy.publicRoutes, methods.methods, target.path);
    log.route = route?.pattern;

    if (!api) {
      if (!route || route.partial) return refuse(res, log, { ok: false, code: 40400, reason: 'no_route' });
      mutateHeaders(req.headers, { keyId: undefined, peerIp: peer, peerTrusted }, requestId);
      return forward(req, res, log, expectContinue);
    }

    const ip = clientIp(peer, peerTrusted ? headerValue(req.headers['x-forwarded-for']) : undefined, policy.trustedProxies);
    log.clientIp = ip;
    let decision;
    try {
      decision = await deps.authenticate(req.rawHeaders);
    } catch (err) {
      decision = storeFailure(err);
    }
    if (decision.ok) {
      log.keyId = decision.key.record.id;
      const authz = authorize(decision.key, ip, route, policy.unlistedRoutes);
      if (authz.ok) log.route = authz.route;
      decision = authz.ok ? decision : authz;
    }
    const authSeconds = (performance.now() - started) / 1000;
    log.authMs = round(authSeconds * 1000);
    metrics.authSeconds.observe({ outcome: decision.ok ? 'allow' : decision.code === 50300 ? 'error' : 'deny' }, authSeconds);
    if (!decision.ok) return refuse(res, log, decision);
    if (res.destroyed) return; // the client went away while we were checking

    mutateHeaders(req.headers, { keyId: decision.key.record.id, peerIp: peer, peerTrusted }, requestId);
    forward(req, res, log, expectContinue);
  }

  function storeFailure(err: unknown): Denial {
    if (!(err instanceof StoreUnavailableError)) logger.error({ err }, 'unexpected error during authentication');
    return { ok: false, code: 50300, reason: 'store_unavailable' };
  }

  return server;
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
