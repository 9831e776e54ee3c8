import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  createRedisReachability,
  redisCause,
  REDIS_CAUSE_HINTS,
} from '../../src/store/redis/connection/redis-reachability.js';

const err = (message: string, code?: string) => Object.assign(new Error(message), code && { code });

describe('redisCause: an ioredis error in Redis terms', () => {
  it.each([
    { e: err('connect ECONNREFUSED 127.0.0.1:6', 'ECONNREFUSED'), cause: 'refused' },
    { e: err('getaddrinfo ENOTFOUND redis.invalid', 'ENOTFOUND'), cause: 'dns' },
    { e: err('getaddrinfo EAI_AGAIN redis', 'EAI_AGAIN'), cause: 'dns' },
    { e: err('connect EHOSTUNREACH 10.0.0.9:6379', 'EHOSTUNREACH'), cause: 'unreachable' },
    { e: err('connect ETIMEDOUT', 'ETIMEDOUT'), cause: 'timeout' },
    { e: err('WRONGPASS invalid username-password pair or user is disabled.'), cause: 'auth' },
    { e: err('NOAUTH Authentication required.'), cause: 'auth' },
    { e: err('self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT'), cause: 'tls' },
    { e: err("Hostname/IP does not match certificate's altnames", 'ERR_TLS_CERT_ALTNAME_INVALID'), cause: 'tls' },
    { e: err('read ECONNRESET', 'ECONNRESET'), cause: 'reset' },
    { e: err('Protocol error, got "H" as reply type byte. Please report this.'), cause: 'protocol' },
    { e: err('something else'), cause: 'other' },
  ])('$e.message → $cause', ({ e, cause }) => {
    expect(redisCause(e)).toBe(cause);
    expect(REDIS_CAUSE_HINTS[redisCause(e)]).toBeTruthy();
  });
});

describe('createRedisReachability', () => {
  const make = () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
    const r = createRedisReachability({ target: 'redis://:***@h:1', command: 'client', subscriber: 'sub' }, { logger });
    return { r, lines };
  };

  it('logs the first failure before any connection was ready, once, naming the Redis and the cause', () => {
    const { r, lines } = make();
    r.error('client', err('connect ECONNREFUSED h:1', 'ECONNREFUSED'));
    r.error('sub', err('connect ECONNREFUSED h:1', 'ECONNREFUSED'));
    r.error('client', err('getaddrinfo ENOTFOUND h', 'ENOTFOUND'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, redis: 'redis://:***@h:1', cause: 'refused' });
    expect(r.problem()).toEqual({ cause: 'dns', err: 'getaddrinfo ENOTFOUND h' });
    expect(r.down()).toBe(true);
  });

  it('says nothing at a later outage (the outage log does), but /readyz still gets the cause', () => {
    const { r, lines } = make();
    r.ready('client');
    r.ready('sub');
    expect([r.problem(), r.down()]).toEqual([undefined, false]);
    r.closed('client');
    r.error('client', err('connect ECONNREFUSED h:1', 'ECONNREFUSED'));
    expect(lines).toEqual([]);
    expect(r.problem()).toEqual({ cause: 'refused', err: 'connect ECONNREFUSED h:1' });
    expect(r.down()).toBe(true);
    r.ready('client');
    expect([r.problem(), r.down()]).toEqual([undefined, false]);
    r.closed('sub');
    expect([r.problem(), r.down()]).toEqual([undefined, true]);
  });
});
