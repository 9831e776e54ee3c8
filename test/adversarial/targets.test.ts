import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { expectNothingForwarded, OTHER_SECRET, settle, startFixture, type Fixture } from '../helpers/adversarial.js';
import { BAD_TARGETS } from '../helpers/cases/request-targets.js';
import { token } from '../helpers/tokens.js';
import { exchange, firstBody } from '../helpers/raw-socket.js';

/**
 * Request targets sent byte for byte over raw sockets (an HTTP client would
 * normalise most of them away). Every request carries a valid token, so a
 * refusal is about the target alone.
 */
describe('adversarial: request targets', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await startFixture();
  });
  afterAll(() => f.close());
  beforeEach(() => f.upstream.reset());

  const line = (method: string, target: string | Buffer) =>
    Buffer.concat([
      Buffer.from(`${method} `),
      Buffer.isBuffer(target) ? target : Buffer.from(target, 'latin1'),
      Buffer.from(` HTTP/1.1\r\nHost: x\r\n${f.auth()}\r\n`),
    ]);

  // [target, status, code]; 400s are answered by check-target (40000) or by Node's parser (no body).
  const refused: Array<[string, string | Buffer, number, number | undefined]> = [
    // check-target's bad_target rule: the table test/unit/check-target.test.ts calls checkTarget with.
    ...BAD_TARGETS.map(([name, target]): [string, string, number, number] => [name, target, 400, 40000]),
    ['authority-form', 'x:80', 400, undefined],
    ['no leading slash', 'api/v3/viewer/accounts', 400, undefined],
    ['double-encoded %252e%252e', '/api/v3/%252e%252e/admin', 403, 10403],
    [
      'non-ASCII UTF-8 bytes',
      Buffer.concat([Buffer.from('/api/v3/viewer/acc'), Buffer.from([0xc3, 0xa9]), Buffer.from('ounts')]),
      400,
      undefined,
    ],
    [
      'a Latin-1 byte',
      Buffer.concat([Buffer.from('/api/v3/viewer/acc'), Buffer.from([0xe9]), Buffer.from('ounts')]),
      400,
      undefined,
    ],
    ['byte 0xff', Buffer.concat([Buffer.from('/api/v3/'), Buffer.from([0xff])]), 400, undefined],
    [
      'overlong UTF-8 for "/" (C0 AF)',
      Buffer.concat([Buffer.from('/api/v3/viewer'), Buffer.from([0xc0, 0xaf]), Buffer.from('accounts')]),
      400,
      undefined,
    ],
    ['tab in the target', '/api/v3/viewer/acc\tounts', 400, undefined],
    // Routers fold case and ignore a trailing slash, so these are /api/v3/ paths, authenticated: none is listed here.
    ['/api/v3 without the slash', '/api/v3', 403, 10403],
    ['/API/V3 without the slash', '/API/V3', 403, 10403],
    ['/API/v3/ unlisted', '/API/v3/admin', 403, 10403],
    ['/api/v2/', '/api/v2/viewer/accounts', 404, 40400],
    ['extra segment on a listed route', '/api/v3/viewer/accounts/x', 403, 10403],
    ['HEAD-only route path with POST', '/api/v3/files', 403, 10403],
    ['path over 4096 bytes', `/api/v3/files/${'a/'.repeat(10)}${'b'.repeat(4100)}`, 400, 40000],
    ['more than 64 segments', `/api/v3/files/${'a/'.repeat(70)}b`, 400, 40000],
    ['encoded "?" does not end the path', '/api/v3/viewer/accounts%3fx=1', 403, 10403],
  ];
  it.each(refused)('%s: %s → %s, nothing forwarded', async (_name, target, status, code) => {
    const r = await exchange(f.gate.port, line('GET', target));
    expect(r.statuses).toEqual([status]);
    if (code !== undefined) expect(firstBody(r.text)).toEqual(expect.objectContaining({ code }));
    if (status === 400) expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  it.each([
    ['OPTIONS *', 'OPTIONS', '*'],
    ['TRACE', 'TRACE', '/api/v3/viewer/accounts'],
    ['lower-case method', 'get', '/api/v3/viewer/accounts'],
    ['unknown method', 'FOO', '/api/v3/viewer/accounts'],
    ['PRI method', 'PRI', '/api/v3/viewer/accounts'],
  ])('%s → 400, closed, nothing forwarded', async (_name, method, target) => {
    const r = await exchange(f.gate.port, line(method, target));
    expect(r.statuses).toEqual([400]);
    expect(r.closed).toBe(true);
    await settle();
    expectNothingForwarded(f.upstream);
  });

  // The same route as the upstream's router reads it (case folded, a trailing slash ignored): authorized as that
  // route, and forwarded unchanged, so the upstream runs the handler whose scopes were checked.
  const sameRoute = [
    '/API/v3/viewer/accounts',
    '/api/V3/viewer/accounts',
    '/Api/v3/Viewer/ACCOUNTS',
    '/api/v3/viewer/accounts/',
    '/API/V3/VIEWER/ACCOUNTS/?x=1',
  ];
  it.each(sameRoute)('%s is the listed route: forwarded byte for byte', async (target) => {
    const r = await exchange(f.gate.port, line('GET', target));
    expect(r.statuses).toEqual([200]);
    await settle();
    expect(f.upstream.received.map((a) => a.url)).toEqual([target]);
    expect(f.upstream.wire().startsWith(`GET ${target} HTTP/1.1\r\n`)).toBe(true);
  });

  it("a key without the route's scope is refused on every spelling of it", async () => {
    for (const target of sameRoute) {
      const raw = `GET ${target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token('narrow', OTHER_SECRET)}\r\n\r\n`;
      const r = await exchange(f.gate.port, Buffer.from(raw));
      expect(r.statuses, target).toEqual([403]);
    }
    await settle();
    expectNothingForwarded(f.upstream);
  });

  // Odd but unambiguous targets: the upstream must get exactly the bytes Keygate authorised.
  const exact = [
    "/api/v3/files/it's",
    "/api/v3/files/!$&'()*+,=:@",
    '/api/v3/files/a%20b',
    '/api/v3/files/%C3%A9',
    '/api/v3/files/%c3%a9',
    '/api/v3/files/a%23b',
    '/api/v3/files/a%3Fb',
    '/api/v3/files/a%252e%252e',
    '/api/v3/files/~user/-_.x',
    '/api/v3/viewer/accounts?',
    "/api/v3/viewer/accounts?a='b'&c=d;e",
    '/api/v3/viewer/accounts?x=/../..&y=%2e%2e%2f',
    '/api/v3/viewer/accounts?a=b?c=d',
    '/api/v3/viewer/accounts?%00',
  ];
  it.each(exact)('%s reaches the upstream byte for byte', async (target) => {
    const r = await exchange(f.gate.port, line('GET', target));
    expect(r.statuses).toEqual([200]);
    await settle();
    expect(f.upstream.received.map((a) => a.url)).toEqual([target]);
    expect(f.upstream.wire().startsWith(`GET ${target} HTTP/1.1\r\n`)).toBe(true);
  });
});
