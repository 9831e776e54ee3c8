import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../clock.js';
import { deny, ERRORS, type Denial, type ErrorCode } from '../errors.js';
import { KEY_ID_HEADER, KEY_OWNER_HEADER, requestIdOf, type UpstreamHead } from '../pipeline/forward-headers.js';
import { ASSERTION_HEADER } from '../assertion/assertion-signer.js';
import type { GatewayMode, OriginalRequest } from './gateway-mode.js';
import { renderError } from './render.js';
import { writeTime } from './time-endpoint.js';

/**
 * On a refusal answered with the status the asking proxy asked for (nginx): the catalogue code, or
 * `time` for the clock endpoint, for the render step. Never on other answers: a proxy that hands
 * Keygate's answer to the client as it is (Traefik, Envoy, Caddy) gives the client proxy mode's headers.
 */
export const CODE_HEADER = 'x-keygate-code';
/**
 * Sent by the asking proxy (the shipped nginx config): answer every refusal with this status
 * (401 or 403), because nginx's auth_request turns any other status into a bare 500.
 */
export const REFUSAL_STATUS_HEADER = 'x-keygate-refusal-status';
/**
 * Sent by the asking proxy after a refusal (nginx error_page): "render the catalogue entry for
 * this code" (or the clock endpoint's answer for `time`), so the client gets Keygate's exact
 * status, body and headers. Never an allow.
 */
export const RENDER_HEADER = 'x-keygate-render';
/** The render value (and X-Keygate-Code) for the clock endpoint. */
export const TIME_RENDER = 'time';
/** What a render request asks for: a catalogue entry, or the clock endpoint's answer. */
export type RenderTarget = ErrorCode | typeof TIME_RENDER;

/** Forward-auth mode: the gateway's mode, plus the parts worth testing on their own. */
export interface ForwardAuthMode extends GatewayMode {
  /**
   * The original method and URI, from exactly one source:
   *   nginx auth_request: X-Original-Method + X-Original-URI (set by the shipped config);
   *   Traefik ForwardAuth: X-Forwarded-Method + X-Forwarded-Uri;
   *   Envoy ext_authz (HTTP service): the check's own method and path, minus the configured prefix.
   * Believed only from a trusted peer; two sources, a repeated header or half a pair is refused.
   */
  original(req: IncomingMessage, peerTrusted: boolean): OriginalRequest | Denial;
  /**
   * Pass (allowed): 200, empty body, X-Api-Key-Id and X-Api-Key-Owner (each empty when there is none: a public
   * route, a key without an owner; so a proxy that only overwrites still replaces a client copy), X-Request-Id,
   * and the RateLimit fields proxy mode would add to the forwarded answer ([name, value, …]), and X-Keygate-Assertion
   * (empty when the assertion is off or on a public route, for the same reason).
   */
  allow(
    res: ServerResponse,
    keyId: string | undefined,
    requestId: string,
    owner: string | undefined,
    rateHeaders?: readonly string[],
    assertion?: string,
  ): void;
  /** The status the asking proxy asked refusals to be answered with (nginx: 401 or 403), if any. */
  forcedStatus(req: IncomingMessage): number | undefined;
  /** Refusal adapted: with a forced status, adds X-Keygate-Code and returns that status. */
  refusing(res: ServerResponse, code: ErrorCode): number | undefined;
  /** What a render request names (from a trusted peer only), or undefined if this is not one. */
  renderCode(req: IncomingMessage): RenderTarget | undefined;
  /** Answers a render request: the catalogue's status, body and headers for that code, or the clock's answer. */
  render(res: ServerResponse, target: RenderTarget, requestId: string): void;
}

const NO_HEADER = -1;
const REPEATED = -2;
const CODE = /^[0-9]{5}$/;
/** The raw index of a header's value on its first sighting; REPEATED after that. */
const seen = (at: number, i: number) => (at === NO_HEADER ? i + 1 : REPEATED);

/** A forward-auth check forwards nothing, so there is no upstream head to build. */
const NOTHING_FORWARDED: UpstreamHead = Object.freeze({
  ok: true,
  headers: Object.freeze([]) as unknown as string[],
  body: 'none',
});
const NO_HEADERS: readonly string[] = Object.freeze([]);

/**
 * Forward-auth mode (KEYGATE_MODE=forward-auth): the request path runs on the
 * request the asking proxy describes, and a pass answers 200 with the identity
 * headers instead of forwarding. The steps themselves stay in request-path.ts.
 */
export function createForwardAuthMode(
  options: { pathPrefix: string | undefined },
  deps: { clock: Clock },
): ForwardAuthMode {
  const prefix = options.pathPrefix;
  const mode: ForwardAuthMode = {
    // The asking proxy forwards the request, with its own trace context.
    forwards: false,
    /**
     * After a refusal nginx asks (error_page) for the body its auth_request dropped. The refusal
     * was recorded by the check itself; this only renders it, so it is not recorded again.
     */
    preempt(req, res, peerTrusted) {
      const code = mode.renderCode(req);
      if (code === undefined || !peerTrusted(req)) return false;
      try {
        mode.render(res, code, requestIdOf(req.headers['x-request-id']));
      } catch {
        res.destroy();
      }
      return true;
    },

    original(req, peerTrusted): OriginalRequest | Denial {
      // Anyone else could claim any URI: their check is refused before a header is read.
      if (!peerTrusted) return deny('untrusted_peer');
      const raw = req.rawHeaders;
      let originalMethod = NO_HEADER;
      let originalUri = NO_HEADER;
      let forwardedMethod = NO_HEADER;
      let forwardedUri = NO_HEADER;
      // Indexes into the raw list, never req.headers: Node joins repeats there, and a repeat is refused.
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i] as string;
        if (name.length < 14 || name.length > 18) continue;
        switch (name.toLowerCase()) {
          case 'x-original-method':
            originalMethod = seen(originalMethod, i);
            break;
          case 'x-original-uri':
            originalUri = seen(originalUri, i);
            break;
          case 'x-forwarded-method':
            forwardedMethod = seen(forwardedMethod, i);
            break;
          case 'x-forwarded-uri':
            forwardedUri = seen(forwardedUri, i);
            break;
        }
      }
      const url = req.url ?? '';
      const nginx = originalMethod !== NO_HEADER || originalUri !== NO_HEADER;
      const traefik = forwardedMethod !== NO_HEADER || forwardedUri !== NO_HEADER;
      const envoy = prefix !== undefined && url.startsWith(`${prefix}/`);
      // Exactly one description: a client behind Traefik adding X-Original-URI (or behind nginx adding
      // X-Forwarded-Uri) would otherwise have Keygate check a request the proxy does not forward.
      if (Number(nginx) + Number(traefik) + Number(envoy) > 1) return deny('bad_check');
      if (nginx || traefik) {
        const m = nginx ? originalMethod : forwardedMethod;
        const u = nginx ? originalUri : forwardedUri;
        if (m < 0 || u < 0) return deny('bad_check');
        return { ok: true, method: raw[m], url: raw[u] };
      }
      if (envoy) return { ok: true, method: req.method, url: url.slice(prefix.length) };
      // With a prefix configured, a check outside it describes nothing.
      if (prefix !== undefined) return deny('bad_check');
      return { ok: true, method: req.method, url };
    },

    upstreamHead: () => NOTHING_FORWARDED,

    /**
     * The clock endpoint, asked as a check. Its answer as it is (Caddy copies it to the client), no
     * identity headers; but a proxy that relays only refusals (nginx, forced status) gets that status
     * with `X-Keygate-Code: time` and asks for the answer in its render step.
     */
    serveTime(res, nowNs, requestId) {
      const status = mode.forcedStatus(res.req);
      if (status === undefined) return writeTime(res, nowNs, requestId, NO_HEADERS);
      const head = [CODE_HEADER, TIME_RENDER, 'x-request-id', requestId];
      res.writeHead(status, [...head, 'cache-control', 'no-store', 'content-length', '0']);
      res.end();
    },

    pass(args) {
      mode.allow(args.res, args.log.keyId, args.log.requestId, args.keyOwner, args.responseHeaders, args.assertion);
      args.passed(ALLOWED);
    },

    allow(res, keyId, requestId, owner, rateHeaders, assertion) {
      const head = [KEY_ID_HEADER, keyId ?? '', KEY_OWNER_HEADER, owner ?? '', 'x-request-id', requestId];
      // Always present, empty when off or on a public route: the Caddy recipe copies it by placeholder,
      // and a placeholder for a header the answer lacks would reach the service as its literal text.
      head.push(ASSERTION_HEADER, assertion ?? '');
      head.push('cache-control', 'no-store', 'content-length', '0');
      if (rateHeaders) head.push(...rateHeaders);
      res.writeHead(200, head);
      res.end();
    },

    forcedStatus(req) {
      const asked = req.headers[REFUSAL_STATUS_HEADER];
      return asked === '401' || asked === '403' ? Number(asked) : undefined;
    },

    refusing(res, code) {
      const status = mode.forcedStatus(res.req);
      if (status !== undefined) res.setHeader(CODE_HEADER, String(code));
      return status;
    },

    renderCode(req) {
      const v = req.headers[RENDER_HEADER];
      if (v === undefined) return undefined;
      if (v === TIME_RENDER) return TIME_RENDER;
      // Anything but one known error code renders as 500 50000: a render request never passes.
      return typeof v === 'string' && CODE.test(v) && Object.hasOwn(ERRORS, v) ? (Number(v) as ErrorCode) : 50000;
    },

    render(res, target, requestId) {
      if (target === TIME_RENDER) return writeTime(res, deps.clock.nowNs(), requestId, NO_HEADERS);
      res.setHeader('x-request-id', requestId);
      renderError(res, target);
    },
  };
  return mode;
}

const ALLOWED = Object.freeze({ status: 200 });
