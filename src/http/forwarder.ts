import { Agent as HttpAgent, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import httpProxy from 'http-proxy';
import type { Logger } from 'pino';
import type { ErrorCode } from '../errors.js';
import { copyResponseHead } from './response-head.js';

export interface ForwarderOptions {
  readonly upstream: URL;
  readonly timeoutMs: number;
  readonly maxSockets: number;
}

/** Called once per forwarded request: the upstream's status, or the error code to answer with. */
export type ForwardDone = (outcome: { status: number } | { code: ErrorCode }) => void;

export interface Forwarder {
  forward(req: IncomingMessage, res: ServerResponse, done: ForwardDone): void;
  close(): void;
}

class UpstreamTimeout extends Error {
  readonly code = 'UPSTREAM_TIMEOUT';
}

/**
 * http-proxy with a keep-alive agent. Keygate sets every forwarding header
 * itself (xfwd off), keeps the client's Host, and maps failures to
 * 502 (refused/reset) and 504 (no answer within timeoutMs).
 */
export function createForwarder(options: ForwarderOptions, deps: { logger: Logger }): Forwarder {
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets, maxFreeSockets: Math.min(options.maxSockets, 64), scheduling: 'lifo' as const };
  const agent = options.upstream.protocol === 'https:' ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);
  const proxy = httpProxy.createProxyServer({
    target: options.upstream.origin,
    agent,
    xfwd: false,
    changeOrigin: false,
    ws: false,
    secure: true,
    // Send req.url exactly as checked: without these, http-proxy re-parses the
    // path with url.parse (which rewrites ' to %27) and joins it to the target path.
    toProxy: true,
    prependPath: false,
    // We write the status and headers ourselves, without the upstream's hop-by-hop headers.
    selfHandleResponse: true,
  });
  // http-proxy's deleteLength pass sets Content-Length: 0 on a DELETE/OPTIONS
  // without one, yet still streams a chunked body after it: the body would
  // reach the upstream as a second, unauthenticated request. Framing is left
  // to Node's HTTP client instead.
  const passes = proxy as unknown as { webPasses: Array<{ name: string }> };
  passes.webPasses = passes.webPasses.filter((pass) => pass.name !== 'deleteLength');
  const pending = new WeakMap<IncomingMessage, ForwardDone>();

  proxy.on('proxyReq', (proxyReq, _req, res) => {
    proxyReq.setTimeout(options.timeoutMs, () => proxyReq.destroy(new UpstreamTimeout('upstream timeout')));
    // The client went away (mid-body or mid-response): drop the upstream
    // exchange too, so its socket is not held until the upstream finishes.
    if (res.destroyed) proxyReq.destroy();
    else res.once('close', () => res.writableFinished || proxyReq.destroy());
  });
  proxy.on('proxyRes', (proxyRes, req, res) => {
    const done = pending.get(req);
    pending.delete(req);
    done?.({ status: proxyRes.statusCode ?? 0 });
    // The upstream died mid-response: the status line is already out, so the
    // only honest signal left to the client is a cut connection.
    proxyRes.on('error', () => res.destroy());
    proxyRes.on('aborted', () => res.destroy());
    if (res.destroyed || res.headersSent) return void proxyRes.destroy();
    copyResponseHead(proxyRes, res);
    proxyRes.pipe(res);
  });

  return {
    forward(req, res, done) {
      pending.set(req, done);
      proxy.web(req, res, {}, (err: Error & { code?: string }) => {
        const cb = pending.get(req);
        pending.delete(req);
        const code: ErrorCode = err instanceof UpstreamTimeout ? 50400 : 50200;
        deps.logger.debug({ requestId: req.headers['x-request-id'], err: err.message, errCode: err.code }, 'upstream error');
        if (cb) cb({ code }); // the gateway renders it (or cuts the connection if a response started)
        else res.destroy();
      });
    },
    close() {
      proxy.close();
      agent.destroy();
    },
  };
}
