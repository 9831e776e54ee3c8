import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import type { Logger } from 'pino';
import type { Reason } from '../errors.js';
import type { BodyFraming } from '../pipeline/forward-headers.js';
import { responseHead } from './response-head.js';

export interface ForwarderOptions {
  readonly upstream: URL;
  /** From being asked (socket assigned, request written) to the upstream's response head; also the idle limit inside its body. */
  readonly timeoutMs: number;
  readonly maxSockets: number;
  /** How long a request may wait for a free upstream connection (then 503 upstream_busy). */
  readonly queueTimeoutMs: number;
  /** A request body still arriving after the grace period must average at least this rate (0 = no minimum). */
  readonly minBodyBytesPerSecond: number;
  readonly bodyRateGraceMs: number;
}

/** What became of a forwarded request: the upstream's status, or the reason Keygate answers with instead. */
export type ForwardOutcome = { readonly status: number } | { readonly reason: Reason };
/** Called exactly once per forwarded request, before anything is written to the client for it. */
export type ForwardDone = (outcome: ForwardOutcome) => void;

export interface ForwardRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The checked request target, sent byte for byte. */
  readonly path: string;
  readonly headers: string[];
  readonly body: BodyFraming;
  /** Added to the response when the upstream sends no X-Request-Id. */
  readonly requestId: string;
  /** Keygate's own response headers (RateLimit), appended after the upstream's: [name, value, …]. */
  readonly responseHeaders?: readonly string[] | undefined;
}

export interface Forwarder {
  forward(request: ForwardRequest, done: ForwardDone): void;
  close(): Promise<void>;
}

const STATUS_TEXT = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Keygate's own forwarding, on an undici Pool. The upstream request is built
 * from the checked request only: the path as checked, the headers chosen by
 * forward-headers.ts, and a body that is sent with its exact Content-Length,
 * chunked, or not at all, as Keygate's parser framed it. The upstream's answer
 * is checked before a byte of it reaches the client: a final status outside
 * 200–599 (undici itself refuses 101 and unsolicited 100), a status text with
 * control characters, or a header Node will not write becomes 502.
 *
 * Waits are bounded: a request that gets no upstream connection within
 * queueTimeoutMs is answered 503 upstream_busy; a body that trickles in below
 * minBodyBytesPerSecond is cut (408 body_too_slow) so that slow clients cannot
 * hold the pool; an upstream that does not answer within timeoutMs gets 504.
 */
export function createForwarder(options: ForwarderOptions, deps: { logger: Logger }): Forwarder {
  const pool = new Pool(options.upstream.origin, {
    connections: options.maxSockets,
    pipelining: 1,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    strictContentLength: true,
    connectTimeout: Math.min(options.timeoutMs, 10_000),
  });
  // The upstream closing an idle pooled connection is routine; errors reach the request they belong to.
  pool.on('connectionError', () => {});

  // One sweep for every bounded wait, instead of a timer per request.
  const waiting = new Set<Exchange>();
  const uploading = new Set<Exchange>();
  const sweepEvery = Math.max(10, Math.min(250, Math.floor(options.queueTimeoutMs / 4)));
  const sweeper = setInterval(() => {
    const now = performance.now();
    for (const x of waiting) if (now - x.queuedAt >= options.queueTimeoutMs) x.giveUp('upstream_busy');
    if (options.minBodyBytesPerSecond > 0) for (const x of uploading) x.checkRate(now);
  }, sweepEvery);
  sweeper.unref();

  class Exchange implements Dispatcher.DispatchHandler {
    readonly queuedAt = performance.now();
    private abortFn: ((err?: Error) => void) | undefined;
    private answered = false;
    private finished = false;
    private resumeFn: (() => void) | undefined;
    private rateFrom = 0;
    private rateBytes = 0;
    private held: Buffer | undefined;

    constructor(
      private readonly req: IncomingMessage,
      private readonly res: ServerResponse,
      private readonly requestId: string,
      private readonly done: ForwardDone,
      private readonly extraHeaders: readonly string[] | undefined,
    ) {
      waiting.add(this);
      if (!req.complete) {
        this.rateFrom = this.queuedAt;
        this.rateBytes = req.socket.bytesRead;
        uploading.add(this);
        req.once('end', () => uploading.delete(this));
      }
      res.once('close', () => {
        this.finished = true;
        waiting.delete(this);
        uploading.delete(this);
        // The client went away: release the upstream exchange too.
        if (!res.writableFinished) this.abortFn?.();
      });
    }

    /** Answer the client instead of the upstream, and drop the upstream exchange. */
    giveUp(reason: Reason) {
      waiting.delete(this);
      uploading.delete(this);
      // A body Keygate will not read leaves the connection unusable: close it after the answer.
      if (!this.req.complete && !this.res.headersSent) this.res.setHeader('connection', 'close');
      this.settle({ reason });
      const abort = this.abortFn;
      this.abortFn = noop; // a later onConnect aborts at once
      // Aborting also destroys the client's request stream (undici's body), which would cut the
      // answer just written: release the upstream exchange once the answer is out instead.
      if (abort) this.res.once('close', () => abort());
    }

    checkRate(now: number) {
      const socket = this.req.socket;
      // Paused means the upstream is not reading fast enough: not the client's fault.
      if (this.req.isPaused()) {
        this.rateFrom = now;
        this.rateBytes = socket.bytesRead;
        return;
      }
      const elapsed = now - this.rateFrom;
      if (elapsed < options.bodyRateGraceMs) return;
      if (((socket.bytesRead - this.rateBytes) * 1000) / elapsed >= options.minBodyBytesPerSecond) return;
      if (this.answered) {
        uploading.delete(this);
        this.res.destroy();
        return;
      }
      this.giveUp('body_too_slow');
    }

    private settle(outcome: ForwardOutcome) {
      if (this.answered) return;
      this.answered = true;
      this.done(outcome);
    }

    onConnect(abort: (err?: Error) => void) {
      waiting.delete(this);
      if (this.abortFn === noop || this.finished) return abort();
      this.abortFn = abort;
    }

    onHeaders(status: number, raw: Buffer[], resume: () => void, statusText: string): boolean {
      if (status < 100) return this.badResponse();
      if (status < 200) return true; // 1xx informational answers are not relayed (undici refuses 101 and a stray 100)
      const res = this.res;
      if (this.answered || res.destroyed) {
        this.abortFn?.();
        return false;
      }
      if (status > 599 || !STATUS_TEXT.test(statusText)) return this.badResponse();
      const head = responseHead(raw, this.requestId);
      if (this.extraHeaders) head.push(...this.extraHeaders);
      try {
        res.writeHead(status, statusText || undefined, head);
      } catch {
        return this.badResponse(); // a header name or value Node refuses to write
      }
      this.settle({ status });
      this.resumeFn = resume;
      return true;
    }

    private badResponse(): false {
      this.settle({ reason: 'upstream_bad_response' });
      this.abortFn?.();
      return false;
    }

    onData(chunk: Buffer): boolean {
      // The latest chunk is held until the end of this tick: a response whose body arrives
      // with its end leaves in one write (res.end(chunk)) instead of two; a streamed body is
      // never delayed past the tick its bytes arrived in.
      if (this.held !== undefined) this.res.write(this.held);
      else queueMicrotask(this.flush);
      this.held = chunk;
      if (!this.res.writableNeedDrain) return true;
      this.res.once('drain', this.resumeFn as () => void);
      return false;
    }

    private readonly flush = () => {
      const held = this.held;
      this.held = undefined;
      if (held !== undefined && !this.res.writableEnded) this.res.write(held);
    };

    onComplete() {
      const held = this.held;
      this.held = undefined;
      if (held === undefined) this.res.end();
      else this.res.end(held);
    }

    onError(err: Error & { code?: string }) {
      waiting.delete(this);
      uploading.delete(this);
      if (this.answered) {
        // The status line is already out (or Keygate answered): a cut connection is the only honest signal left.
        if (!this.res.writableFinished) this.res.destroy();
        return;
      }
      deps.logger.debug({ err: err.message, errCode: err.code }, 'upstream error');
      this.settle({ reason: upstreamFailure(err) });
    }
  }

  return {
    forward({ req, res, path, headers, body, requestId, responseHeaders }, done) {
      const exchange = new Exchange(req, res, requestId, done, responseHeaders);
      if (typeof body === 'number') headers.push('content-length', String(body));
      pool.dispatch(
        {
          origin: options.upstream.origin,
          method: req.method as Dispatcher.HttpMethod,
          path,
          headers,
          // No body: undici writes no framing. A length: undici checks the bytes sent against it. Chunked: no length given.
          body: body === 'none' || body === 0 ? null : req,
        },
        exchange,
      );
    },
    async close() {
      clearInterval(sweeper);
      await pool.destroy();
    },
  };
}

function noop() {}

/** undici's error → the reason Keygate answers with: too slow (504), spoke broken HTTP (502), or refused/reset (502). */
function upstreamFailure(err: Error & { code?: string }): Reason {
  const code = err.code ?? '';
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return 'upstream_timeout';
  // llhttp refused the response, or undici refused an unrequested 101 / a stray 100.
  if (
    err.name === 'HTTPParserError' ||
    code.startsWith('HPE_') ||
    (code === 'UND_ERR_SOCKET' && /^bad (upgrade|response)$/.test(err.message))
  )
    return 'upstream_bad_response';
  return 'upstream_error';
}
