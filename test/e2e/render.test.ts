import { createServer as createHttpServer } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES, ERRORS, errorBody, type ErrorCode } from '../../src/errors.js';
import { renderError, renderRawError } from '../../src/gateway/render.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { exchange } from '../helpers/raw-socket.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';

/** What every answer with this status must carry beyond the body (RFC 9110: a 401 challenge, a 503 retry hint). */
const expectedHeaders = (status: number): Record<string, string | undefined> => ({
  'www-authenticate': status === 401 ? 'Bearer' : undefined,
  'retry-after': status === 503 ? '1' : undefined,
});

describe('renderError and renderRawError: status-driven headers for every code in the catalogue', () => {
  let code: ErrorCode = 40004;
  const http = createHttpServer((_req, res) => renderError(res, code));
  const raw = createNetServer((socket) => socket.once('data', () => renderRawError(socket, code)));
  const portOf = (s: { address(): unknown }) => (s.address() as AddressInfo).port;
  beforeAll(async () => {
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
  });
  afterAll(() => {
    http.close();
    raw.close();
  });

  it.each(ERROR_CODES.map((c) => [c, ERRORS[c].status]))('%i (HTTP %i)', async (c, status) => {
    code = c;
    const res = await send(`http://127.0.0.1:${portOf(http)}`, '/');
    expect(res.status).toBe(status);
    expect(res.json()).toEqual(errorBody(c));
    for (const [name, value] of Object.entries(expectedHeaders(status))) expect(res.headers[name], name).toBe(value);

    const text = (await exchange(portOf(raw), 'GET / HTTP/1.1\r\nHost: x\r\n\r\n')).text;
    const head = text.split('\r\n\r\n')[0]!.toLowerCase();
    expect(head.startsWith(`http/1.1 ${status} `)).toBe(true);
    for (const [name, value] of Object.entries(expectedHeaders(status))) {
      if (value === undefined) expect(head, name).not.toContain(`${name}:`);
      else expect(head, name).toContain(`\r\n${name}: ${value.toLowerCase()}\r\n`);
    }
  });
});

describe('a running Keygate sends the challenge and the retry hint', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let deadRedis: RunningKeygate;
  let redis: TestRedis;
  const key = makeKey({ apiKey: 'hdr-key' });
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, keys: [key] });
    // Redis is killed after Keygate connected: key lookups fail, and Keygate fails closed with 503.
    redis = await startRedis();
    deadRedis = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_REDIS_TIMEOUT_MS: '200' },
    });
    await redis.kill();
  });
  afterAll(async () => {
    await gate.close();
    await deadRedis.close();
    await redis.stop();
    await upstream.close();
  });

  it.each([
    ['no Authorization header', () => send(gate.url, '/api/v3/viewer/accounts'), 401, 40004],
    [
      'a bad signature',
      () =>
        send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(token(key.apiKey, 'wrong-secret-0123456789abc')) }),
      401,
      40106,
    ],
    [
      'a store that does not answer',
      () => send(deadRedis.url, '/api/v3/viewer/accounts', { headers: bearer(token(key.apiKey, key.secret!)) }),
      503,
      50300,
    ],
    [
      'an unknown key (404, no challenge)',
      () => send(gate.url, '/api/v3/viewer/accounts', { headers: bearer(token('nobody', key.secret!)) }),
      404,
      10013,
    ],
  ] as const)('%s', async (_name, call, status, code) => {
    const before = upstream.received.length;
    const res = await call();
    expect(res.status).toBe(status);
    expect(res.json()).toEqual(errorBody(code));
    for (const [name, value] of Object.entries(expectedHeaders(status))) expect(res.headers[name], name).toBe(value);
    expect(upstream.received.length).toBe(before);
  });
});
