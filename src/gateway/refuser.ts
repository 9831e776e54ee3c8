// Tested in test/e2e/render.test.ts, test/adversarial/request-path.test.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { deny, ERRORS, type Denial } from '../errors.js';
import type { RequestLog } from '../observe/request-record.js';
import type { RateLimited } from '../pipeline/authenticate.js';
import { blockedState, type IpBlocked } from '../pipeline/ip-budget.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { GatewayMode } from './gateway-mode.js';
import { limitedHeaders } from './rate-limit-headers.js';
import { renderBlocked, renderError } from './render.js';
import { SERVER_TIME_HEADER } from './time-endpoint.js';

export interface Refuser {
  /** The one refusal path: the verdict noted on the log, adapted by the mode, rendered. Returns false ("answered"). */
  refuse(res: ServerResponse, log: RequestLog, decision: Denial | RateLimited): false;
  /**
   * 429 10429 `ip_blocked`: the client IP's failed-authentication budget `limit` is empty for
   * `blockedMs` more. The same answer as `refuse` with that budget's state, rendered in one prepared head
   * in the common case (proxy mode, the request complete). Returns false ("answered").
   */
  refuseBlocked(res: ServerResponse, log: RequestLog, limit: CompiledLimit, blockedMs: number): false;
  /** The error boundary's answer: whatever threw is logged, the client gets 500 50000, the process serves on. */
  internalError(res: ServerResponse, log: RequestLog, err: unknown): void;
  /** Sockets on which Keygate answered "Connection: close": nothing more is served on them. */
  readonly closing: WeakSet<Socket>;
}

/**
 * Whether a request's body has all been read. A refusal made in the request listener itself (a blocked IP,
 * or a verdict the store gave synchronously) comes before Node marks even a bodiless request complete (it
 * does so right after): a request with no body framing has nothing more to read, so its connection stays
 * open, as it would for the same refusal answered a tick later.
 */
function bodyRead(req: IncomingMessage): boolean {
  return (
    req.complete ||
    (req.headers['transfer-encoding'] === undefined &&
      (req.headers['content-length'] === undefined || req.headers['content-length'] === '0'))
  );
}

/** How a verdict becomes the client's answer, for every step of the request path. */
export function createRefuser(deps: { logger: Logger; clock: Clock; mode: GatewayMode }): Refuser {
  const { logger, clock, mode } = deps;
  const closing = new WeakSet<Socket>();

  function refuse(res: ServerResponse, log: RequestLog, decision: Denial | RateLimited): false {
    return refuseAs(res, log, decision, bodyRead(res.req));
  }

  function refuseAs(res: ServerResponse, log: RequestLog, decision: Denial | RateLimited, complete: boolean): false {
    // A refused request whose body has not all arrived: close rather than read the rest,
    // so nothing after our answer is parsed from it.
    if (!complete) res.setHeader('connection', 'close');
    if (res.getHeader('connection') === 'close') closing.add(res.req.socket);
    log.code = decision.code;
    log.reason = decision.reason;
    res.setHeader('x-request-id', log.requestId);
    const status = mode.refusing(res, decision.code);
    // Logged as the client gets it (after nginx's render step), not as the forced status nginx is sent.
    if (status !== undefined) log.status = ERRORS[decision.code].status;
    const extra =
      // Both tell the client to sign again with a nonce from the server's clock.
      decision.reason === 'nonce_window' || decision.reason === 'fenced'
        ? { [SERVER_TIME_HEADER]: clock.nowNs().toString() }
        : 'rate' in decision
          ? limitedHeaders(decision.rate, decision.reason === 'cost_exceeds_burst')
          : undefined;
    renderError(res, decision.code, extra, status, decision.reason);
    return false;
  }

  function refuseBlocked(res: ServerResponse, log: RequestLog, limit: CompiledLimit, blockedMs: number): false {
    const complete = bodyRead(res.req);
    const status = mode.refusing(res, 10429);
    if (status !== undefined || !complete) {
      // An asking proxy that forces a status (forward-auth), or a body still arriving: the general path.
      const decision: IpBlocked = {
        ...deny('ip_blocked'),
        rate: { limits: [limit], states: [blockedState(limit, blockedMs * 1_000)] },
      };
      return refuseAs(res, log, decision, complete);
    }
    if (res.getHeader('connection') === 'close') closing.add(res.req.socket);
    log.code = 10429;
    log.reason = 'ip_blocked';
    // Whole seconds, rounded up, as limitedHeaders writes them (blockedMs > 0, so at least 1).
    const state = blockedState(limit, blockedMs * 1_000);
    renderBlocked(res, log.requestId, limit, Math.ceil(state.retryAfterUs / 1e6), Math.ceil(state.resetUs / 1e6));
    return false;
  }

  function internalError(res: ServerResponse, log: RequestLog, err: unknown) {
    logger.error({ err, requestId: log.requestId }, 'internal error while handling a request');
    try {
      refuse(res, log, deny('internal_error'));
    } catch {
      res.destroy();
    }
  }

  return { refuse, refuseBlocked, internalError, closing };
}
