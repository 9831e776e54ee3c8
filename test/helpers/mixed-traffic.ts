import type { OutgoingHttpHeaders } from 'node:http';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RunningKeygate } from './keygate.js';
import { makeKey } from './make-key.js';
import { bearer, send } from './http.js';
import { exchange, statusOf } from './raw-socket.js';
import { claims, HS256, nowNonce, sign, token } from './tokens.js';
import type { RecordingUpstream } from './recording-upstream.js';
import { ACCOUNTS_PATH } from './constants.js';

export const MIXED_SECRET = 'mixed-secret-never-logged-0123456789';

/** Policy and settings the mixed run needs (a scoped route, a public route, a short upstream timeout). */
export function mixedTrafficEnv(): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-mixed-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(
    policy,
    [
      'routes:',
      `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
      '  - { method: GET, path: /api/v3/admin/things, scopes: [admin] }',
      'unlistedRoutes: deny',
      'public:',
      '  - { method: GET, path: /status }',
      'trustedProxies: []',
      '',
    ].join('\n'),
  );
  return { KEYGATE_CONFIG: policy, KEYGATE_UPSTREAM_TIMEOUT_MS: '300', KEYGATE_MAX_HEADER_BYTES: '4096' };
}

export function mixedTrafficKeys() {
  return [
    makeKey({ apiKey: 'good', secret: MIXED_SECRET, id: 'key-good' }),
    makeKey({ apiKey: 'walled', secret: MIXED_SECRET, id: 'key-walled', allowIps: ['10.0.0.0/8'] }),
    makeKey({ apiKey: 'gone', secret: MIXED_SECRET, id: 'key-gone', state: 'revoked' }),
  ];
}

export interface MixedResult {
  /** Expected increase of keygate_requests_total{code}. */
  requests: Record<string, number>;
  /** Expected increase of keygate_auth_rejections_total, keyed "code/reason". */
  rejections: Record<string, number>;
  /** Expected count of keygate_upstream_duration_seconds by status_class. */
  upstream: Record<string, number>;
  /** Expected increase of keygate_upstream_errors_total by cause. */
  upstreamErrors: Record<string, number>;
  /** Expected count of keygate_auth_duration_seconds by outcome. */
  auth: Record<string, number>;
  /** Every token sent (for redaction checks). */
  tokens: string[];
}

/**
 * One request for every outcome Keygate can produce without breaking Redis:
 * forwarded (2xx, upstream 4xx, public route), each seed error, each of
 * Keygate's own codes including the parser's 400/431, 502 and 504. Checks
 * every status as it goes and returns what the metrics must show.
 */
export async function runMixedTraffic(gate: RunningKeygate, upstream: RecordingUpstream): Promise<MixedResult> {
  upstream.handler = (req, res) => {
    if (req.url?.includes('reset=1')) return req.socket.destroy();
    if (req.url?.includes('slow=1')) return void setTimeout(() => res.end('late'), 1_500);
    res.statusCode = req.url?.includes('missing=1') ? 404 : 200;
    res.setHeader('content-type', 'application/json');
    res.end('{"ok":true}');
  };
  const tokens: string[] = [];
  const t = (apiKey: string, secret = MIXED_SECRET, extra: Record<string, unknown> = {}) => {
    const v = token(apiKey, secret, extra);
    tokens.push(v);
    return v;
  };
  const first = t('good');
  const cases: Array<{ status: number; code: string; reason?: string; run: () => Promise<number> }> = [
    {
      status: 200,
      code: 'ok',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(first) })).status,
    },
    {
      status: 200,
      code: 'ok',
      run: async () => (await send(gate.url, `${ACCOUNTS_PATH}?page=2`, { headers: bearer(t('good')) })).status,
    },
    {
      status: 200,
      code: 'ok',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t('good')) })).status,
    },
    {
      status: 404,
      code: 'ok',
      run: async () => (await send(gate.url, `${ACCOUNTS_PATH}?missing=1`, { headers: bearer(t('good')) })).status,
    },
    { status: 200, code: 'public', run: async () => (await send(gate.url, '/status')).status },
    {
      status: 401,
      code: '40106',
      reason: 'replay',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(first) })).status,
    },
    {
      status: 401,
      code: '40106',
      reason: 'bad_signature',
      run: async () =>
        (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t('good', 'wrong-secret-0123456789abcdef')) })).status,
    },
    {
      status: 401,
      code: '40106',
      reason: 'malformed',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer('x.y.z') })).status,
    },
    {
      status: 401,
      code: '40106',
      reason: 'nonce_window',
      run: async () => {
        const old = sign(HS256, claims('good', { nonce: nowNonce(-120_000) }), MIXED_SECRET);
        tokens.push(old);
        return (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(old) })).status;
      },
    },
    {
      status: 401,
      code: '40004',
      reason: 'missing_header',
      run: async () => (await send(gate.url, ACCOUNTS_PATH)).status,
    },
    {
      status: 400,
      code: '40107',
      reason: 'bad_header_format',
      run: async () =>
        (await send(gate.url, ACCOUNTS_PATH, { headers: { authorization: `bearer ${t('good')}` } })).status,
    },
    {
      status: 400,
      code: '40107',
      reason: 'duplicate_header',
      run: async () =>
        (
          await send(gate.url, ACCOUNTS_PATH, {
            headers: {
              authorization: [`Bearer ${t('good')}`, `Bearer ${t('good')}`],
            } as unknown as OutgoingHttpHeaders,
          })
        ).status,
    },
    {
      status: 404,
      code: '10013',
      reason: 'unknown_key',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t('nobody')) })).status,
    },
    {
      status: 404,
      code: '10013',
      reason: 'revoked',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t('gone')) })).status,
    },
    {
      status: 403,
      code: '10403',
      reason: 'ip_denied',
      run: async () => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(t('walled')) })).status,
    },
    {
      status: 403,
      code: '10403',
      reason: 'scope_denied',
      run: async () => (await send(gate.url, '/api/v3/admin/things', { headers: bearer(t('good')) })).status,
    },
    {
      status: 403,
      code: '10403',
      reason: 'route_not_listed',
      run: async () => (await send(gate.url, '/api/v3/unlisted', { headers: bearer(t('good')) })).status,
    },
    { status: 404, code: '40400', reason: 'no_route', run: async () => (await send(gate.url, '/nope')).status },
    {
      status: 400,
      code: '40000',
      reason: 'bad_target',
      run: async () => statusOf((await exchange(gate.port, 'GET /api/v3/../x HTTP/1.1\r\nHost: a\r\n\r\n')).text),
    },
    {
      status: 400,
      code: '40000',
      reason: 'bad_request',
      run: async () =>
        statusOf(
          (
            await exchange(
              gate.port,
              `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: a\r\nBad Header: y\r\nAuthorization: Bearer ${t('good')}\r\n\r\n`,
            )
          ).text,
        ),
    },
    {
      status: 431,
      code: '43100',
      reason: 'headers_too_large',
      run: async () =>
        statusOf(
          (
            await exchange(
              gate.port,
              `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${t('good')}\r\nX-Pad: ${'p'.repeat(6_000)}\r\n\r\n`,
            )
          ).text,
        ),
    },
    {
      status: 502,
      code: '50200',
      reason: 'upstream_error',
      run: async () => (await send(gate.url, `${ACCOUNTS_PATH}?reset=1`, { headers: bearer(t('good')) })).status,
    },
    {
      status: 504,
      code: '50400',
      reason: 'upstream_timeout',
      run: async () => (await send(gate.url, `${ACCOUNTS_PATH}?slow=1`, { headers: bearer(t('good')) })).status,
    },
  ];
  const result: MixedResult = { requests: {}, rejections: {}, upstream: {}, upstreamErrors: {}, auth: {}, tokens };
  const bump = (o: Record<string, number>, k: string) => (o[k] = (o[k] ?? 0) + 1);
  for (const c of cases) {
    const status = await c.run();
    if (status !== c.status)
      throw new Error(`mixed traffic: expected ${c.status} for ${c.code}/${c.reason ?? ''}, got ${status}`);
    bump(result.requests, c.code);
    if (c.reason) bump(result.rejections, `${c.code}/${c.reason}`);
  }
  upstream.handler = undefined;
  // Forwarded: 3× 2xx on the API + 1× public 2xx, 1× upstream 404; 502 and 504 observed as error/timeout.
  result.upstream = { '2xx': 4, '4xx': 1, error: 1, timeout: 1 };
  // The 502: the upstream closed the connection without answering; the 504: no response head in time.
  result.upstreamErrors = { reset: 1, timeout: 1 };
  // Requests that reached the authentication step: every /api/v3/ request the parser and target check let through.
  result.auth = { allow: 6, deny: 12 };
  return result;
}

/** Polls `read` until `done` holds (for hooks, where expect.poll is not allowed). */
export async function waitFor<T>(read: () => Promise<T>, done: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (done(v)) return v;
    if (Date.now() > deadline)
      throw new Error(`waitFor: condition not met within ${timeoutMs} ms (last value ${JSON.stringify(v)})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
