// Tested in test/e2e/streams.test.ts, test/e2e/stream-revocation.test.ts, test/adversarial/smuggling.test.ts.
import { ServerResponse, type IncomingMessage } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { Limits } from '../../config/read-limits.js';
import { deny, type Reason } from '../../errors.js';
import { ASSERTION_HEADER, type AssertionSigner } from '../../assertion/assertion-signer.js';
import type { Metrics, UpstreamCause } from '../../observe/metrics.js';
import { roundMs } from '../../observe/request-record.js';
import type { StreamCloseReason, StreamMetrics } from '../../observe/stream-metrics.js';
import type { Authenticator } from '../../pipeline/authenticate.js';
import { forwardHeaders, KEY_ID_HEADER, KEY_OWNER_HEADER } from '../../pipeline/forward-headers.js';
import type { Policy } from '../../policy/policy.js';
import type { GatewayMode, OriginalRequest, PassArgs } from '../gateway-mode.js';
import type { Forwarder } from '../upstream/forwarder.js';
import { createProxyMode } from '../proxy-mode.js';
import { createRequestPath, type RequestPathDeps } from '../request-path.js';
import type { TracerSlot } from '../../observe/tracer.js';
import type { StreamRegistry, StreamSlot } from './stream-registry.js';
import { StreamRelay } from './stream-relay.js';
import { writeTime } from '../time-endpoint.js';
import { upstreamCause } from '../upstream/upstream-exchange.js';
import {
  checkUpgradeAnswer,
  checkUpgradeRequest,
  upgradeRequestHead,
  type UpgradeRequest,
} from './upgrade-handshake.js';

export interface UpgradePathDeps {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly metrics: Metrics;
  readonly authenticate: Authenticator;
  readonly policy: () => Policy;
  readonly assertion?: AssertionSigner | undefined;
  readonly streams: StreamRegistry;
  readonly streamMetrics: StreamMetrics;
  /** Proxy mode's forwarder: an upgrade to another protocol (h2c) is forwarded as plain HTTP, as before streams. */
  readonly forwarder: Forwarder;
  /** Tracing; absent = off. The upgrade is a request of the path, with its SERVER span. */
  readonly tracing?: TracerSlot | undefined;
  /** Usage by outcome of verified keys (request-path.ts); absent = not counted. */
  readonly usage?: RequestPathDeps['usage'];
}

export interface UpgradePathOptions {
  readonly upstream: URL;
  readonly limits: Limits;
  readonly rateLimitHeaders: boolean;
}

/** The server's 'upgrade' listener. */
export type UpgradeListener = (req: IncomingMessage, socket: Socket, head: Buffer) => void;

const NO_HEADERS: readonly string[] = Object.freeze([]);
const noop = () => {};

/**
 * WebSocket upgrades (proxy mode). An upgrade request walks the request path itself, every step of it
 * (request-path.ts, with this mode in place of proxy mode): screened, its target checked, its route
 * matched, authenticated, authorized and rate-limited exactly as a request, and refused by the same
 * refuser as an ordinary HTTP answer, never 101. Only the pass differs: the route must say
 * `upgrade: websocket`, the key must be under KEYGATE_MAX_STREAMS_PER_KEY, and then Keygate opens its own
 * connection to the upstream, writes the handshake it built (the identity headers of proxy mode), checks
 * the upstream's 101, relays it, and joins the sockets (stream-relay.ts), registered per key so a key
 * change can close them (stream-registry.ts).
 */
export function createUpgradePath(options: UpgradePathOptions, deps: UpgradePathDeps): UpgradeListener {
  const { upstream, limits } = options;
  const { streams, streamMetrics } = deps;
  /** What the listener learnt before the walk, for the pass: the client's early bytes and its handshake. */
  const handshakes = new WeakMap<IncomingMessage, { head: Buffer }>();
  const plain = createProxyMode(deps.forwarder, limits);

  const mode: GatewayMode = {
    forwards: true,
    preempt: () => false,
    original: (req: IncomingMessage): OriginalRequest => ({ ok: true, method: req.method, url: req.url }),
    // Before authentication, so a handshake that could never be relayed burns no nonce.
    upstreamHead(raw, peerIp, peerTrusted, requestId) {
      const head = forwardHeaders(raw, { peerIp, peerTrusted, requestId });
      if (!head.ok) return head;
      // Node's parser read no body after an upgrade head: one that declares a body has bytes nobody framed.
      if (head.body !== 'none') return deny('bad_upgrade');
      // Another protocol (h2c): forwarded as plain HTTP without Upgrade, as Keygate always did.
      if (!isWebSocket(raw)) return head;
      const request = checkUpgradeRequest(raw);
      if (!request.ok) return request;
      // Keygate's own fields of the handshake (upgrade-handshake.ts) replace the client's.
      for (let i = head.headers.length - 2; i >= 0; i -= 2)
        if (/^sec-websocket-(?:key|version)$/i.test(head.headers[i] as string)) head.headers.splice(i, 2);
      return head;
    },
    serveTime: (res, nowNs, requestId) => writeTime(res, nowNs, requestId, NO_HEADERS),
    refusing(_res, code) {
      streamMetrics.refused(code);
      return undefined;
    },
    pass: (args) => pass(args),
  };
  const path = createRequestPath(limits, options.rateLimitHeaders, { ...deps, mode });

  function pass(args: PassArgs) {
    if (!isWebSocket(args.req.rawHeaders)) return plain.pass(args);
    const { req, route, keyRecord, credential } = args;
    const handshake = handshakes.get(req);
    const request = handshake && checkUpgradeRequest(req.rawHeaders);
    if (
      handshake === undefined ||
      request === undefined ||
      !request.ok ||
      keyRecord === undefined ||
      credential === undefined ||
      route?.upgrade !== 'websocket' ||
      req.method !== 'GET' ||
      req.httpVersion !== '1.1'
    )
      return args.passed({ reason: 'upgrade_not_allowed' });
    void streams.reserve(keyRecord.apiKey).then(
      (slot) => {
        if (slot === undefined) return args.passed({ reason: 'streams_limited' });
        // The client left while the instance's count was asked (workers): nothing to answer.
        if (req.socket.destroyed) return slot.release();
        relayTo(args, slot, request, handshake);
      },
      // reserve never rejects; relayTo throwing is a bug, answered as the error boundary would.
      () => args.passed({ reason: 'internal_error' }),
    );
  }

  function relayTo(args: PassArgs, slot: StreamSlot, request: UpgradeRequest, handshake: { head: Buffer }) {
    const { req, res, log, head, keyOwner, assertion, route, credential } = args;
    const headers = head.headers;
    headers.push('Sec-WebSocket-Key', request.key, 'Sec-WebSocket-Version', '13');
    headers.push(KEY_ID_HEADER, log.keyId as string);
    if (keyOwner !== undefined) headers.push(KEY_OWNER_HEADER, keyOwner);
    if (assertion !== undefined) headers.push(ASSERTION_HEADER, assertion);

    const sent = performance.now();
    const client = req.socket;
    let settled = false;
    const up = openUpstream();
    const timer = setTimeout(() => fail('upstream_timeout', 'timeout'), limits.upstreamTimeoutMs);
    const clientGone = () => {
      // The client left during the handshake: nothing to answer; the record notes it aborted.
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      up.destroy();
      slot.release();
    };
    res.once('close', clientGone);
    let received: Buffer = Buffer.alloc(0);
    up.on('error', (err: Error & { code?: string }) => fail(undefined, upstreamCause(err)));
    up.on('close', () => fail('upstream_error', 'reset'));
    up.write(upgradeRequestHead(req.url as string, headers));
    up.on('data', onData);

    function onData(chunk: Buffer) {
      received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
      const end = received.indexOf('\r\n\r\n');
      if (end < 0) {
        if (received.length > limits.maxHeaderBytes) fail('upstream_bad_response', 'bad_response');
        return;
      }
      if (end > limits.maxHeaderBytes) return fail('upstream_bad_response', 'bad_response');
      const answer = checkUpgradeAnswer(received.subarray(0, end).toString('latin1'), request);
      if (answer === null) return fail('upstream_bad_response', 'bad_response');
      joined(answer, received.subarray(end + 4));
    }

    function fail(reason: Reason | undefined, cause: UpstreamCause) {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      res.off('close', clientGone);
      up.destroy();
      slot.release();
      args.passed(
        { reason: reason ?? (cause === 'timeout' ? 'upstream_timeout' : 'upstream_error'), cause },
        roundMs(performance.now() - sent),
      );
    }

    function joined(answer: string[], fromUpstream: Buffer) {
      settled = true;
      clearTimeout(timer);
      res.off('close', clientGone);
      up.off('data', onData);
      up.removeAllListeners('close');
      up.removeAllListeners('error');
      up.pause();
      // Traced: the upgrade's span stays open for the stream's life and ends with the reason it closed.
      args.span?.keepOpen();
      args.passed({ status: 101 }, roundMs(performance.now() - sent));
      answer.push('X-Request-Id', log.requestId);
      if (args.responseHeaders) answer.push(...args.responseHeaders);
      // The 101 goes out through the response, so the request is recorded (and leaves the in-flight
      // count) now; the listener's 'finish' hands the socket over to the relay.
      res.writeHead(101, 'Switching Protocols', answer);
      res.end();
      const relay = new StreamRelay(client, up, limits.streamCloseGraceMs);
      const span = args.span;
      slot.activate({
        relay,
        ip: args.ip,
        route: route as NonNullable<typeof route>,
        ...(span !== undefined && { onEnd: (reason: StreamCloseReason) => span.streamEnded(reason) }),
        credential: credential as string,
      });
      relay.start(handshake?.head ?? Buffer.alloc(0), fromUpstream);
    }
  }

  function openUpstream(): Socket {
    const port = Number(upstream.port) || (upstream.protocol === 'https:' ? 443 : 80);
    const host = upstream.hostname.replace(/^\[(.*)\]$/, '$1');
    const socket =
      upstream.protocol === 'https:'
        ? tlsConnect({ host, port, servername: /^[\d.:]+$/.test(host) ? undefined : host, ALPNProtocols: ['http/1.1'] })
        : netConnect({ host, port });
    socket.setNoDelay(true);
    return socket;
  }

  return function onUpgrade(req, socket, head) {
    socket.on('error', noop);
    // An upgrade pipelined behind a response still being written: nothing sane can be said on this connection.
    if ((socket as { _httpMessage?: unknown })._httpMessage) return void socket.destroy();
    socket.setNoDelay(true);
    handshakes.set(req, { head });
    // The parser stops at an upgrade's head and reads no body: the request, as Keygate will use it, is complete
    // (one that declares a body is refused in upstreamHead).
    req.complete = true;
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.on('error', noop);
    res.assignSocket(socket);
    // What Node's server does when a response finishes, for a socket it no longer owns: detach, and say
    // the response closed (the record is written then). A refusal then closes the connection; a 101
    // leaves the socket to the relay.
    res.once('finish', () => {
      res.detachSocket(socket);
      if (res.statusCode !== 101) socket.destroySoon();
      process.nextTick(() => res.emit('close'));
    });
    path.handle(req, res, false);
  };
}

/** Is the Upgrade a WebSocket one (the only protocol relayed)? Anything else is forwarded as plain HTTP. */
function isWebSocket(raw: readonly string[]): boolean {
  for (let i = 0; i < raw.length; i += 2)
    if ((raw[i] as string).toLowerCase() === 'upgrade' && (raw[i + 1] as string).trim().toLowerCase() === 'websocket')
      return true;
  return false;
}
