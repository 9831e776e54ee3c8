import { describe, expect, it } from 'vitest';
import {
  checkUpgradeAnswer,
  checkUpgradeRequest,
  upgradeRequestHead,
} from '../../src/gateway/streams/upgrade-handshake.js';
import { acceptFor } from '../../src/gateway/streams/ws-frames.js';

const KEY = 'dGhlIHNhbXBsZSBub25jZQ==';
const GOOD = ['Host', 'x', 'Upgrade', 'websocket', 'Sec-WebSocket-Key', KEY, 'Sec-WebSocket-Version', '13'];

describe('checkUpgradeRequest', () => {
  it('accepts a WebSocket handshake and reads its offer', () => {
    const r = checkUpgradeRequest([...GOOD, 'Sec-WebSocket-Protocol', 'v1, v2', 'Sec-WebSocket-Extensions', 'x']);
    expect(r).toEqual({ ok: true, key: KEY, protocols: ['v1', 'v2'], extensions: true });
  });
  it.each([
    ['another protocol (h2c)', GOOD.map((v) => (v === 'websocket' ? 'h2c' : v))],
    ['no key', GOOD.slice(0, 4).concat(GOOD.slice(6))],
    ['a malformed key', GOOD.map((v) => (v === KEY ? 'abc' : v))],
    ['version 8', GOOD.map((v) => (v === '13' ? '8' : v))],
    ['a repeated Upgrade', [...GOOD, 'Upgrade', 'websocket']],
    ['a repeated key', [...GOOD, 'Sec-WebSocket-Key', KEY]],
    ['a protocol that is not a token', [...GOOD, 'Sec-WebSocket-Protocol', 'a b']],
  ])('refuses %s (bad_upgrade)', (_name, raw) => {
    expect(checkUpgradeRequest(raw)).toMatchObject({ ok: false, code: 40000, reason: 'bad_upgrade' });
  });
});

describe('upgradeRequestHead', () => {
  it('writes the target byte for byte, the chosen headers, then Keygate’s own hop-by-hop fields', () => {
    const head = upgradeRequestHead('/api/v3/stream/a%20b?x=1', ['Host', 'x', 'X-Api-Key-Id', 'id-1']).toString(
      'latin1',
    );
    expect(head).toBe(
      'GET /api/v3/stream/a%20b?x=1 HTTP/1.1\r\nHost: x\r\nX-Api-Key-Id: id-1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
    );
  });
});

describe('checkUpgradeAnswer', () => {
  const request = { ok: true as const, key: KEY, protocols: ['v1'], extensions: false };
  const accept = acceptFor(KEY);
  const answer = (...lines: string[]) => ['HTTP/1.1 101 Switching Protocols', ...lines].join('\r\n');
  const good = ['Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${accept}`];

  it('accepts a valid 101 and relays only the handshake fields', () => {
    expect(checkUpgradeAnswer(answer(...good, 'Set-Cookie: a=b', 'Sec-WebSocket-Protocol: v1'), request)).toEqual([
      'Upgrade',
      'websocket',
      'Connection',
      'Upgrade',
      'Sec-WebSocket-Accept',
      accept,
      'Sec-WebSocket-Protocol',
      'v1',
    ]);
  });
  it.each([
    ['a 200', ['HTTP/1.1 200 OK', ...good].join('\r\n')],
    ['a 403', ['HTTP/1.1 403 Forbidden', 'Content-Length: 0'].join('\r\n')],
    ['HTTP/1.0', ['HTTP/1.0 101 Switching Protocols', ...good].join('\r\n')],
    ['a wrong accept', answer('Upgrade: websocket', 'Connection: Upgrade', 'Sec-WebSocket-Accept: AAAA')],
    ['no accept', answer('Upgrade: websocket', 'Connection: Upgrade')],
    ['Upgrade other than websocket', answer('Upgrade: h2c', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${accept}`)],
    [
      'Connection without upgrade',
      answer('Upgrade: websocket', 'Connection: close', `Sec-WebSocket-Accept: ${accept}`),
    ],
    ['a protocol the client did not offer', answer(...good, 'Sec-WebSocket-Protocol: v9')],
    ['an extension the client did not offer', answer(...good, 'Sec-WebSocket-Extensions: permessage-deflate')],
    ['a folded header line', answer(...good, ' folded')],
    ['a control character in the status line', 'HTTP/1.1 101 Switch\x01ing\r\n' + good.join('\r\n')],
  ])('refuses %s', (_name, head) => {
    expect(checkUpgradeAnswer(head, request)).toBeNull();
  });
});
