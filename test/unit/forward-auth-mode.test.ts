import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  CODE_HEADER,
  createForwardAuthMode,
  REFUSAL_STATUS_HEADER,
  RENDER_HEADER,
} from '../../src/gateway/forward-auth-mode.js';
import { systemClock } from '../../src/clock.js';

const clock = systemClock();

describe('original: which request a check describes', () => {
  const fa = createForwardAuthMode({ pathPrefix: '/keygate-check' }, { clock });
  const noPrefix = createForwardAuthMode({ pathPrefix: undefined }, { clock });
  const check = (url: string, headers: string[], method = 'GET') =>
    ({ url, method, rawHeaders: headers, headers: {} }) as unknown as IncomingMessage;
  const ORIGINAL = ['X-Original-Method', 'POST', 'X-Original-URI', '/api/v3/a?b=1'];
  const FORWARDED = ['X-Forwarded-Method', 'DELETE', 'X-Forwarded-Uri', '/api/v3/c'];
  it.each([
    {
      name: 'nginx headers',
      fa,
      req: check('/_keygate/check', ORIGINAL),
      want: { method: 'POST', url: '/api/v3/a?b=1' },
    },
    {
      name: 'nginx headers, any case',
      fa,
      req: check('/', ['x-original-uri', '/api/v3/a', 'X-ORIGINAL-METHOD', 'PUT']),
      want: { method: 'PUT', url: '/api/v3/a' },
    },
    { name: 'Traefik headers', fa, req: check('/', FORWARDED), want: { method: 'DELETE', url: '/api/v3/c' } },
    {
      name: 'Envoy: own method, path minus the prefix',
      fa,
      req: check('/keygate-check/api/v3/d?e=f', [], 'PATCH'),
      want: { method: 'PATCH', url: '/api/v3/d?e=f' },
    },
    {
      name: 'Envoy without a prefix: own method and path',
      fa: noPrefix,
      req: check('/api/v3/d', [], 'HEAD'),
      want: { method: 'HEAD', url: '/api/v3/d' },
    },
    { name: 'untrusted peer', fa, req: check('/', ORIGINAL), trusted: false, reason: 'untrusted_peer' },
    {
      name: 'nginx and Traefik headers together',
      fa,
      req: check('/', [...ORIGINAL, ...FORWARDED]),
      reason: 'bad_check',
    },
    {
      name: 'nginx headers on an Envoy-prefixed path',
      fa,
      req: check('/keygate-check/api/v3/x', ORIGINAL),
      reason: 'bad_check',
    },
    {
      name: 'X-Original-URI twice',
      fa,
      req: check('/', [...ORIGINAL, 'X-Original-URI', '/api/v3/other']),
      reason: 'bad_check',
    },
    {
      name: 'X-Forwarded-Uri without the method',
      fa,
      req: check('/', ['X-Forwarded-Uri', '/api/v3/c']),
      reason: 'bad_check',
    },
    {
      name: 'X-Original-Method without the URI',
      fa,
      req: check('/', ['X-Original-Method', 'GET']),
      reason: 'bad_check',
    },
    { name: 'prefix configured, path outside it, no headers', fa, req: check('/api/v3/x', []), reason: 'bad_check' },
    { name: 'prefix without the slash after it', fa, req: check('/keygate-checkapi/v3/x', []), reason: 'bad_check' },
  ])('$name', ({ fa: f, req, trusted, want, reason }) => {
    const got = f.original(req, trusted ?? true);
    if (reason) expect(got).toMatchObject({ ok: false, reason });
    else expect(got).toEqual({ ok: true, ...want });
  });
});

describe('renderCode: which refusal a render request asks for', () => {
  const fa = createForwardAuthMode({ pathPrefix: undefined }, { clock });
  const asking = (headers: Record<string, string | string[] | undefined>) =>
    ({ headers }) as unknown as IncomingMessage;
  it.each([
    { name: 'no render header: not a render request', headers: {}, want: undefined },
    { name: 'a known code', headers: { [RENDER_HEADER]: '40106' }, want: 40106 },
    { name: 'an unknown five-digit code renders 50000', headers: { [RENDER_HEADER]: '12345' }, want: 50000 },
    { name: 'not a code renders 50000', headers: { [RENDER_HEADER]: '200' }, want: 50000 },
    { name: 'a code with a sign renders 50000', headers: { [RENDER_HEADER]: '+40106' }, want: 50000 },
    { name: 'an inherited property name renders 50000', headers: { [RENDER_HEADER]: 'constructor' }, want: 50000 },
    { name: 'repeated renders 50000', headers: { [RENDER_HEADER]: ['40106', '40106'] }, want: 50000 },
    {
      name: 'the clock endpoint (nginx, after X-Keygate-Code: time)',
      headers: { [RENDER_HEADER]: 'time' },
      want: 'time',
    },
    { name: 'the clock endpoint in another case renders 50000', headers: { [RENDER_HEADER]: 'TIME' }, want: 50000 },
  ])('$name', ({ headers, want }) => {
    expect(fa.renderCode(asking(headers))).toBe(want);
  });
});

describe('refusing: how a refusal is adapted for the asking proxy', () => {
  const fa = createForwardAuthMode({ pathPrefix: undefined }, { clock });
  const response = (asked: string | undefined) => {
    const set = new Map<string, string>();
    const headers = asked === undefined ? {} : { [REFUSAL_STATUS_HEADER]: asked };
    const res = { req: { headers }, setHeader: (n: string, v: string) => set.set(n, v) };
    return { res: res as unknown as ServerResponse, set };
  };
  // X-Keygate-Code only with a forced status: any other answer goes to the client as it is, as proxy mode's would.
  it.each([
    { name: 'no status asked: the catalogue status, no code header', asked: undefined, want: undefined },
    { name: '401 asked', asked: '401', want: 401 },
    { name: '403 asked', asked: '403', want: 403 },
    { name: 'any other status asked is ignored', asked: '500', want: undefined },
    { name: 'not a number is ignored', asked: '40x', want: undefined },
  ])('$name', ({ asked, want }) => {
    const { res, set } = response(asked);
    expect(fa.refusing(res, 40106)).toBe(want);
    expect(set.get(CODE_HEADER)).toBe(want === undefined ? undefined : '40106');
  });
});
