import { describe, expect, it } from 'vitest';
import { upstreamCause } from '../../src/gateway/upstream/upstream-exchange.js';

const err = (code: string | undefined, message = 'x', extra: Record<string, unknown> = {}) =>
  Object.assign(new Error(message), code === undefined ? {} : { code }, extra);

describe('upstreamCause: the error of a failed exchange → a fixed cause label', () => {
  it.each([
    [err('ENOTFOUND', 'getaddrinfo ENOTFOUND api.internal'), 'dns'],
    [err('EAI_AGAIN'), 'dns'],
    [err('ECONNREFUSED'), 'refused'],
    [err('EHOSTUNREACH'), 'unreachable'],
    [err('ENETUNREACH'), 'unreachable'],
    [err('ERR_SSL_WRONG_VERSION_NUMBER'), 'tls'],
    [err('EPROTO'), 'tls'],
    [err('DEPTH_ZERO_SELF_SIGNED_CERT'), 'tls'],
    [err('UNABLE_TO_VERIFY_LEAF_SIGNATURE'), 'tls'],
    [err('UND_ERR_CONNECT_TIMEOUT'), 'timeout'],
    [err('UND_ERR_HEADERS_TIMEOUT'), 'timeout'],
    [err('HPE_INVALID_CONSTANT'), 'bad_response'],
    [err('UND_ERR_SOCKET', 'bad response'), 'bad_response'],
    [err('UND_ERR_SOCKET', 'other side closed'), 'reset'],
    [err('ECONNRESET'), 'reset'],
    [err('UND_ERR_SOCKET', 'x', { cause: err('ECONNREFUSED') }), 'reset'],
    [err(undefined, 'wrapped', { cause: err('ENOTFOUND') }), 'dns'],
    [err('SOMETHING_NEW'), 'other'],
    [err(undefined), 'other'],
  ])('%s → %s', (e, cause) => {
    expect(upstreamCause(e)).toBe(cause);
  });
});
