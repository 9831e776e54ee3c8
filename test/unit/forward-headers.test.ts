import { describe, expect, it } from 'vitest';
import { forwardHeaders, requestIdOf, type HeaderContext } from '../../src/pipeline/forward-headers.js';

const ctx: HeaderContext = { peerIp: '10.0.0.9', peerTrusted: false, requestId: 'req-1' };
const trusted: HeaderContext = { ...ctx, peerTrusted: true };
const KEYGATE_OWN = [
  'x-forwarded-for',
  '10.0.0.9',
  'x-forwarded-proto',
  'http',
  'x-forwarded-host',
  'h',
  'x-request-id',
  'req-1',
];

/** Table: raw header list in → the upstream's header list and framing out (or the refusal). */
const cases: Array<{
  name: string;
  raw: string[];
  c?: HeaderContext;
  headers?: string[];
  body?: unknown;
  reason?: string;
}> = [
  {
    name: 'plain request keeps order and spelling',
    raw: ['Host', 'h', 'Accept', 'a/b', 'X-Custom', '1'],
    headers: ['Host', 'h', 'Accept', 'a/b', 'X-Custom', '1', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'Authorization never reaches the upstream',
    raw: ['Host', 'h', 'Authorization', 'Bearer t'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'Content-Length frames the body with its exact length, and is re-written by Keygate',
    raw: ['Host', 'h', 'Content-Length', '12'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 12,
  },
  {
    name: 'Content-Length: 0 is a length of 0',
    raw: ['Host', 'h', 'Content-Length', '0'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 0,
  },
  {
    name: 'Transfer-Encoding: chunked is chunked (any case)',
    raw: ['Host', 'h', 'Transfer-Encoding', 'Chunked'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'chunked',
  },
  {
    name: 'a transfer coding other than chunked is refused',
    raw: ['Host', 'h', 'Transfer-Encoding', 'gzip, chunked'],
    reason: 'bad_framing',
  },
  {
    name: 'Connection cannot remove Content-Length',
    raw: ['Host', 'h', 'Connection', 'content-length', 'Content-Length', '3'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 3,
  },
  {
    name: 'Connection cannot remove Transfer-Encoding',
    raw: ['Host', 'h', 'Connection', 'Transfer-Encoding', 'Transfer-Encoding', 'chunked'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'chunked',
  },
  {
    name: 'Connection cannot remove Host',
    raw: ['Host', 'h', 'Connection', 'host'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'Connection removes an extension hop-by-hop header',
    raw: ['Host', 'h', 'Connection', 'x-hop, close', 'X-Hop', '1', 'X-Keep', '2'],
    headers: ['Host', 'h', 'X-Keep', '2', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'two Connection headers are read together',
    raw: ['Connection', 'x-a', 'Host', 'h', 'Connection', 'x-b', 'X-A', '1', 'X-B', '2'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'hop-by-hop and Expect are dropped',
    raw: [
      'Host',
      'h',
      'Keep-Alive',
      't=1',
      'TE',
      'trailers',
      'Trailer',
      'x',
      'Upgrade',
      'ws',
      'Expect',
      '100-continue',
      'Proxy-Authorization',
      'p',
      'Proxy-Connection',
      'k',
    ],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'every X-Api-Key-* spelling is dropped',
    raw: ['Host', 'h', 'X-Api-Key-Id', 'admin', 'x_api_key_id', 'a', 'X.Api.Key', 'b', 'X-API-KEY-SCOPES', 'c'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'client X-Request-Id, X-Original-URL and X-Rewrite-URL are dropped',
    raw: ['Host', 'h', 'X-Request-Id', 'abc', 'X-Original-URL', '/admin', 'X-Rewrite-URL', '/admin'],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: 'forwarding headers from an untrusted peer are replaced',
    raw: [
      'Host',
      'h',
      'X-Forwarded-For',
      '1.2.3.4',
      'Forwarded',
      'for=1.2.3.4',
      'X-Real-IP',
      '1.2.3.4',
      'X-Forwarded-Port',
      '1',
      'X_Forwarded_Host',
      'evil',
    ],
    headers: ['Host', 'h', ...KEYGATE_OWN],
    body: 'none',
  },
  {
    name: "a trusted peer's X-Forwarded-For (all lines), -Proto and -Host are kept and extended",
    raw: [
      'Host',
      'h',
      'X-Forwarded-For',
      '1.1.1.1',
      'X-Forwarded-For',
      '2.2.2.2',
      'X-Forwarded-Proto',
      'https',
      'X-Forwarded-Host',
      'api.example',
      'X-Real-IP',
      '9.9.9.9',
    ],
    c: trusted,
    headers: [
      'Host',
      'h',
      'x-forwarded-for',
      '1.1.1.1, 2.2.2.2, 10.0.0.9',
      'x-forwarded-proto',
      'https',
      'x-forwarded-host',
      'api.example',
      'x-request-id',
      'req-1',
    ],
    body: 'none',
  },
  {
    name: 'no Host (HTTP/1.0): no X-Forwarded-Host',
    raw: ['Accept', '*/*'],
    headers: ['Accept', '*/*', 'x-forwarded-for', '10.0.0.9', 'x-forwarded-proto', 'http', 'x-request-id', 'req-1'],
    body: 'none',
  },
];

describe('forwardHeaders', () => {
  it.each(cases)('$name', ({ raw, c, headers, body, reason }) => {
    const out = forwardHeaders(raw, c ?? ctx);
    if (reason) {
      expect(out).toMatchObject({ ok: false, code: 40000, reason });
      return;
    }
    expect(out).toEqual({ ok: true, headers, body });
  });
});

describe('requestIdOf', () => {
  it.each([
    ['abc-123', true],
    ['a'.repeat(128), true],
    ['a'.repeat(129), false],
    ['abc%0d%0a', false],
    ['has space', false],
    [undefined, false],
  ])('%s kept: %s', (sent, kept) => {
    const id = requestIdOf(sent);
    if (kept) expect(id).toBe(sent);
    else expect(id).toMatch(/^[0-9a-f-]{36}$/);
  });
});
