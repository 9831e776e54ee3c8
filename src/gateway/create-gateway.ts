// Tested in test/e2e/create-gateway.test.ts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config/load-config.js';
import { serverTimeouts } from '../config/server-timeouts.js';
import type { Reason } from '../errors.js';
import { ipAllowed, normalizeIp } from '../net/cidr.js';
import type { Metrics } from '../observe/metrics.js';
import type { Authenticator } from '../pipeline/authenticate.js';
import type { AssertionSigner } from '../assertion/assertion-signer.js';
import type { Policy } from '../policy/policy.js';
import { createForwardAuthMode } from './forward-auth-mode.js';
import type { Forwarder } from './upstream/forwarder.js';
import type { GatewayMode } from './gateway-mode.js';
import { createProxyMode } from './proxy-mode.js';
import { createRequestPath, type RequestPathDeps } from './request-path.js';
import type { StreamMetrics } from '../observe/stream-metrics.js';
import type { StreamRegistry } from './streams/stream-registry.js';
import { createUpgradePath } from './streams/upgrade-path.js';
import type { TracerSlot } from '../observe/tracer.js';

export interface GatewayDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly authenticate: Authenticator;
  /** Proxy mode's way upstream; none in forward-auth mode (KEYGATE_MODE=forward-auth), where the asking proxy forwards. */
  readonly forwarder?: Forwarder;
  /** The policy in force (it reloads without a restart): read once per request. */
  readonly policy: () => Policy;
  /** Signs X-Keygate-Assertion (KEYGATE_ASSERTION_KEYS_FILE); absent = the assertion is off. */
  readonly assertion?: AssertionSigner;
  /** Blocked client IPs (failedAuthLimit): refused before the rest of the path (request-path.ts). */
  readonly ipBlocks?: RequestPathDeps['ipBlocks'];
  /** WebSocket streams (proxy mode): the open streams by key and their metrics; absent = no 'upgrade' listener. */
  readonly streams?: { readonly registry: StreamRegistry; readonly metrics: StreamMetrics };
  /** Tracing (OTEL_EXPORTER_OTLP_*); absent = off. */
  readonly tracing?: TracerSlot | undefined;
  /** Usage by outcome of verified keys (the store's countOutcome); absent = not counted. */
  readonly usage?: RequestPathDeps['usage'];
}

/**
 * The proxy port: the HTTP server and its listeners. The mode (proxy or
 * forward-auth) is chosen here, once; every request then walks the steps of
 * request-path.ts, which never asks which mode it runs in.
 */
export function createGateway(config: Config, deps: GatewayDeps): Server {
  const mode = chooseMode(config, deps.forwarder, deps.clock);
  const { limits } = config;
  const path = createRequestPath(limits, config.rateLimitHeaders, { ...deps, mode });

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
  const peerTrusted = (req: IncomingMessage) => {
    const trusted = deps.policy().trustedProxies;
    return trusted !== null && ipAllowed(trusted, normalizeIp(req.socket.remoteAddress ?? ''));
  };
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if (!mode.preempt(req, res, peerTrusted)) path.handle(req, res, false);
  });
  // With this listener Node does not answer "100 Continue" on its own: only a
  // request that is about to be forwarded is told to send its body.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => path.handle(req, res, true));
  // Streams: with this listener, Node hands every request with `Connection: upgrade` and an Upgrade
  // header here, never to 'request'. It walks the same steps (upgrade-path.ts); only a route that says
  // `upgrade: websocket` is relayed, anything else is refused. Forward-auth mode registers none: there
  // an upgrade is the asking proxy's to relay, and Keygate checks it as a plain request.
  if (deps.streams !== undefined && deps.forwarder !== undefined && config.upstream !== undefined)
    server.on(
      'upgrade',
      createUpgradePath(
        { upstream: config.upstream, limits, rateLimitHeaders: config.rateLimitHeaders },
        { ...deps, forwarder: deps.forwarder, streams: deps.streams.registry, streamMetrics: deps.streams.metrics },
      ),
    );
  // Node hands CONNECT to this event, never to 'request'; unheard, it drops the socket without a word.
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => socket.destroy());
    path.refuseRaw(socket, 'bad_target', { method: req.method, clientIp: normalizeIp(socket.remoteAddress ?? '') });
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
    path.refuseRaw(socket, reason, { clientIp: normalizeIp(socket.remoteAddress ?? ''), parserError: err.code });
  });
  return server;
}

/** Proxy mode needs the forwarder; forward-auth mode must not get one (nothing is forwarded). */
function chooseMode(config: Config, forwarder: Forwarder | undefined, clock: Clock): GatewayMode {
  if (config.mode === 'forward-auth') {
    if (forwarder !== undefined)
      throw new Error('createGateway: forward-auth mode forwards nothing; pass no forwarder');
    return createForwardAuthMode({ pathPrefix: config.forwardAuthPathPrefix }, { clock });
  }
  if (forwarder === undefined) throw new Error('createGateway: proxy mode needs a forwarder');
  return createProxyMode(forwarder, config.limits);
}
