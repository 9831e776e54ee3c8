import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectNothingForwarded, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { headerNames } from '../helpers/recording-upstream.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const req = (headers: string, path = ACCOUNTS_PATH, method = 'GET') =>
  `${method} ${path} HTTP/1.1\r\nHost: gate.test\r\n${headers}\r\n`;

/** Hostile headers over raw sockets: answer, connection state and what the upstream got. */
describe('adversarial: headers', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(() => f.close());
  beforeEach(() => f.upstream.reset());

  const refused: Array<[string, (tok: () => string) => string, number, number]> = [
    [
      'duplicate Authorization, same token',
      (t) => {
        const v = t();
        return `Authorization: Bearer ${v}\r\nAuthorization: Bearer ${v}\r\n`;
      },
      400,
      40107,
    ],
    [
      'duplicate Authorization, two valid tokens',
      (t) => `Authorization: Bearer ${t()}\r\nAuthorization: Bearer ${t()}\r\n`,
      400,
      40107,
    ],
    [
      'duplicate Authorization in different cases',
      (t) => `authorization: Bearer ${t()}\r\nAUTHORIZATION: Bearer ${t()}\r\n`,
      400,
      40107,
    ],
    [
      'duplicate Authorization, the second one empty',
      (t) => `Authorization: Bearer ${t()}\r\nAuthorization: \r\n`,
      400,
      40107,
    ],
    ['Authorization with a tab after Bearer', (t) => `Authorization: Bearer\t${t()}\r\n`, 400, 40107],
    ['Authorization with two spaces', (t) => `Authorization: Bearer  ${t()}\r\n`, 400, 40107],
    ['Authorization "bearer" in lower case', (t) => `Authorization: bearer ${t()}\r\n`, 400, 40107],
    ['Authorization "Bearer" with no token', () => 'Authorization: Bearer\r\n', 400, 40107],
    ['Authorization "Bearer " (trailing space trimmed by the parser)', () => 'Authorization: Bearer \r\n', 400, 40107],
    ['Authorization with two tokens', (t) => `Authorization: Bearer ${t()} ${t()}\r\n`, 400, 40107],
    ['Authorization Basic', () => 'Authorization: Basic Z29vZDpzZWNyZXQ=\r\n', 400, 40107],
    ['Authorization empty', () => 'Authorization:\r\n', 401, 40004],
    ['no Authorization', () => '', 401, 40004],
    ['token only in Proxy-Authorization', (t) => `Proxy-Authorization: Bearer ${t()}\r\n`, 401, 40004],
    ['token in a look-alike header (Authorisation)', (t) => `Authorisation: Bearer ${t()}\r\n`, 401, 40004],
    ['token in X-Authorization', (t) => `X-Authorization: Bearer ${t()}\r\n`, 401, 40004],
    ['spoofed X-Api-Key-Id and no token', () => 'X-Api-Key-Id: key-good\r\n', 401, 40004],
    [
      'Connection: Authorization (try to make a hop drop it before us)',
      (t) => `Connection: Authorization\r\nAuthorization: Bearer ${t()}x\r\n`,
      401,
      40106,
    ],
  ];
  it.each(refused)('%s → %i %i, nothing forwarded', async (_name, headers, status, code) => {
    const r = await exchange(f.gate.port, req(headers(f.tok)));
    expect(r.statuses).toEqual([status]);
    expect(firstBody(r.text)).toMatchObject({ code });
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('Authorization with trailing whitespace: not part of the field value (RFC 9110 OWS), so the token passes', async () => {
    const r = await exchange(f.gate.port, req(`Authorization: Bearer ${f.tok()} \t \r\n`));
    expect(r.statuses).toEqual([200]);
  });

  const spoofs: Array<[string, string]> = [
    ['X-Api-Key-Id', 'X-Api-Key-Id: admin\r\n'],
    ['x-api-key-id', 'x-api-key-id: admin\r\n'],
    ['X-API-KEY-ID', 'X-API-KEY-ID: admin\r\n'],
    ['x_api_key_id', 'x_api_key_id: admin\r\n'],
    ['X_Api_Key_Id', 'X_Api_Key_Id: admin\r\n'],
    ['x.api.key.id', 'x.api.key.id: admin\r\n'],
    ['x-api_key.id', 'x-api_key.id: admin\r\n'],
    ['X-Api-Key-Id twice', 'X-Api-Key-Id: admin\r\nX-Api-Key-Id: admin2\r\n'],
    [
      'every spelling at once',
      'X-Api-Key-Id: admin\r\nx_api_key_id: admin\r\nX-API-KEY-ID: admin\r\nx.api.key.id: admin\r\nx-api-key-id: admin\r\n',
    ],
    ['90 copies (just under the header count limit)', 'X-Api-Key-Id: admin\r\n'.repeat(90)],
    ['X-Api-Key-Id empty', 'X-Api-Key-Id:\r\n'],
    ['X-Api-Key-Scopes', 'X-Api-Key-Scopes: admin\r\n'],
    ['X-Api-Key', 'X-Api-Key: admin\r\n'],
    ['Connection: X-Api-Key-Id (drop ours downstream)', 'Connection: X-Api-Key-Id\r\n'],
    ['Connection: close, X-Api-Key-Id, X-Forwarded-For', 'Connection: close, X-Api-Key-Id, X-Forwarded-For\r\n'],
    ['Connection: x-api-key-id in lower case with spaces', 'Connection:   x-api-key-id  ,keep-alive\r\n'],
    ['Trailer: X-Api-Key-Id', 'Trailer: X-Api-Key-Id\r\n'],
    ['Keep-Alive and TE hop-by-hop headers', 'Keep-Alive: timeout=600\r\nTE: trailers\r\n'],
  ];
  it.each(spoofs)('client-sent %s never reaches the upstream; ours does, exactly once', async (_name, extra) => {
    const r = await exchange(f.gate.port, req(`${f.auth()}${extra}`, `${ACCOUNTS_PATH}?spoof=1`));
    expect(r.statuses).toEqual([200]);
    await settle();
    expect(f.upstream.received).toHaveLength(1);
    const got = f.upstream.received[0]!;
    expect(got.url).toBe(`${ACCOUNTS_PATH}?spoof=1`);
    const identity = headerNames(got.rawHeaders).filter((n) =>
      n
        .toLowerCase()
        .replace(/[^a-z0-9]/g, '-')
        .startsWith('x-api-key'),
    );
    expect(identity).toEqual(['x-api-key-id']);
    expect(got.headers['x-api-key-id']).toBe('key-good');
    expect(got.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(got.headers.authorization).toBeUndefined();
    expect(got.headers.trailer).toBeUndefined();
    expect(got.headers['keep-alive']).toBeUndefined();
    expect(got.headers.te).toBeUndefined();
    expect(f.upstream.wire()).not.toContain('admin');
  });

  it.each([
    ['X-Original-URL', 'X-Original-URL: /api/v3/admin/users\r\n'],
    ['X-Rewrite-URL', 'X-Rewrite-URL: /api/v3/admin/users\r\n'],
    ['x_original_url (underscore spelling)', 'x_original_url: /api/v3/admin/users\r\n'],
    ['both, in odd case', 'x-ORIGINAL-url: /api/v3/admin/users\r\nX-REWRITE-URL: /api/v3/admin/users\r\n'],
  ])(
    'client-sent %s never reaches the upstream (routers that honour it would run another route)',
    async (_name, extra) => {
      const r = await exchange(f.gate.port, req(`${f.auth()}${extra}`));
      expect(r.statuses).toEqual([200]);
      await settle();
      expect(f.upstream.received.map((a) => a.url)).toEqual([ACCOUNTS_PATH]);
      expect(f.upstream.wire()).not.toContain('/api/v3/admin/users');
    },
  );

  // Not allowed by the adversarial policy (no methodOverride): refused before authentication, 400 40000.
  it.each([
    ['X-HTTP-Method-Override', 'POST', '/api/v3/items/7', 'X-HTTP-Method-Override: DELETE\r\n'],
    ['X-HTTP-Method', 'POST', '/api/v3/items/7', 'X-HTTP-Method: DELETE\r\n'],
    ['X-Method-Override', 'POST', '/api/v3/items/7', 'X-Method-Override: DELETE\r\n'],
    ['X_HTTP_METHOD_OVERRIDE', 'POST', '/api/v3/items/7', 'X_HTTP_METHOD_OVERRIDE: DELETE\r\n'],
    ['_method in the query', 'POST', '/api/v3/items/7?_method=DELETE', ''],
    ['%5Fmethod in the query', 'POST', '/api/v3/items/7?%5Fmethod=DELETE', ''],
    ['on a public route', 'POST', '/status', 'X-HTTP-Method-Override: DELETE\r\n'],
  ])('method override by %s → 400 40000, nothing forwarded', async (_name, method, path, extra) => {
    const r = await exchange(f.gate.port, req(`${f.auth()}Content-Length: 0\r\n${extra}`, path, method));
    expect(r.statuses).toEqual([400]);
    expect(firstBody(r.text)).toMatchObject({ code: 40000 });
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it('on a public route, spoofed identity headers are dropped and none is injected', async () => {
    const r = await exchange(
      f.gate.port,
      req(
        'X-Api-Key-Id: admin\r\nx_api_key_id: admin\r\nAuthorization: Bearer x.y.z\r\nConnection: X-Api-Key-Id\r\n',
        '/status',
      ),
    );
    expect(r.statuses).toEqual([200]);
    await settle();
    const names = headerNames(f.upstream.received[0]!.rawHeaders).map((n) => n.toLowerCase());
    expect(names.filter((n) => n.replace(/[^a-z0-9]/g, '-').startsWith('x-api-key'))).toEqual([]);
    expect(names).not.toContain('authorization');
  });

  it('forwarding headers from an untrusted peer are replaced, in every spelling', async () => {
    const r = await exchange(
      f.gate.port,
      req(
        `${f.auth()}X-Forwarded-For: 10.0.0.1\r\nx_forwarded_for: 10.0.0.2\r\nX-Real-IP: 10.0.0.3\r\nForwarded: for=10.0.0.4\r\nX-Forwarded-Host: evil.test\r\nX-Forwarded-Proto: https\r\nx.forwarded.host: evil.test\r\n`,
      ),
    );
    expect(r.statuses).toEqual([200]);
    await settle();
    const got = f.upstream.received[0]!;
    expect(got.headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(got.headers['x-forwarded-host']).toBe('gate.test');
    expect(got.headers['x-forwarded-proto']).toBe('http');
    expect(f.upstream.wire()).not.toMatch(/10\.0\.0\.|evil\.test|for=/);
  });

  // One rule on every path (docs/security.md, "No request smuggling"): a repeated Host is refused before any
  // step reads a header, whether the request would be forwarded, answered by Keygate itself or passed as public.
  it.each([
    { path: ACCOUNTS_PATH, what: 'a forwarded route, with a valid token', auth: true },
    { path: '/api/v3/time', what: 'the time endpoint Keygate answers itself', auth: false },
    { path: '/status', what: 'a public route', auth: false },
    { path: '/nowhere', what: 'a path no route names', auth: false },
  ])('duplicate Host on $what ($path): 400 40000 ambiguous_header, nothing forwarded', async ({ path, auth }) => {
    for (const hosts of ['Host: first.test\r\nHost: second.test\r\n', 'Host: same.test\r\nhost: same.test\r\n']) {
      const r = await exchange(f.gate.port, `GET ${path} HTTP/1.1\r\n${hosts}${auth ? f.auth() : ''}\r\n`);
      expect(r.statuses).toEqual([400]);
      expect(firstBody(r.text)).toMatchObject({ code: 40000 });
    }
    await settle();
    expect(f.upstream.received).toHaveLength(0);
    // The control: the same requests with one Host are served (forwarded, answered, or refused for their own reason).
    const one = await exchange(f.gate.port, `GET ${path} HTTP/1.1\r\nHost: first.test\r\n${auth ? f.auth() : ''}\r\n`);
    expect(one.statuses).toEqual([path === '/nowhere' ? 404 : 200]);
  });

  it('a client X-Request-Id with CRLF-looking text is replaced, not echoed', async () => {
    const r = await exchange(f.gate.port, req(`${f.auth()}X-Request-Id: abc%0d%0aX-Api-Key-Id:admin\r\n`));
    expect(r.statuses).toEqual([200]);
    expect(r.text).not.toContain('%0d%0a');
    await settle();
    expect(f.upstream.received[0]!.headers['x-request-id']).not.toContain('%0d');
  });

  it('the client’s Connection: close is honoured after a forwarded request', async () => {
    const r = await exchange(f.gate.port, req(`${f.auth()}Connection: close\r\n`), { quietMs: 3_000 });
    expect(r.statuses).toEqual([200]);
    expect(r.closed).toBe(true);
    expect(r.ms).toBeLessThan(2_000);
  });

  it('upstream hop-by-hop response headers do not reach the client; repeated headers stay repeated', async () => {
    f.upstream.handler = (_req, res) => {
      res.writeHead(200, [
        ['Connection', 'keep-alive, X-Internal'],
        ['Keep-Alive', 'timeout=999'],
        ['X-Internal', 'secret'],
        ['Proxy-Connection', 'keep-alive'],
        ['Set-Cookie', 'a=1'],
        ['Set-Cookie', 'b=2'],
        ['X-Upstream', 'yes'],
        ['Content-Length', '2'],
      ]);
      res.end('ok');
    };
    const r = await exchange(f.gate.port, req(f.auth()));
    expect(r.statuses).toEqual([200]);
    const head = r.text.slice(0, r.text.indexOf('\r\n\r\n'));
    expect(head).not.toMatch(/timeout=999|X-Internal|Proxy-Connection/i);
    expect(head.match(/^Set-Cookie: /gim)).toHaveLength(2);
    expect(head).toMatch(/^X-Upstream: yes$/m);
    expect(r.text.endsWith('\r\n\r\nok')).toBe(true);
  });

  describe('oversized headers (KEYGATE_MAX_HEADER_BYTES, default 16384)', () => {
    it.each([
      ['one 17 kB header', (a: string) => `${a}X-Big: ${'a'.repeat(17_000)}\r\n`],
      ['3000 small headers', (a: string) => `${a}${Array.from({ length: 3000 }, (_, i) => `X-H${i}: 1\r\n`).join('')}`],
      ['a 20 kB Authorization header', () => `Authorization: Bearer ${'a'.repeat(20_000)}.b.c\r\n`],
      ['a 20 kB request target', (a: string) => `${a}`],
    ])('%s → 431, closed, nothing forwarded', async (name, headers) => {
      const path = name.includes('target') ? `${ACCOUNTS_PATH}?${'q'.repeat(20_000)}` : ACCOUNTS_PATH;
      const r = await exchange(f.gate.port, req(headers(f.auth()), path));
      expect(r.statuses).toEqual([431]);
      expect(r.closed).toBe(true);
      await settle();
      expectNothingForwarded(f.upstream);
    });

    it('headers just under the limit still pass', async () => {
      const r = await exchange(f.gate.port, req(`${f.auth()}X-Big: ${'a'.repeat(14_000)}\r\n`));
      expect(r.statuses).toEqual([200]);
      await settle();
      expect(f.upstream.received[0]!.headers['x-big']).toHaveLength(14_000);
    });
  });
});
