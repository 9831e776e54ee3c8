import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKey, startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import {
  openStream,
  PLAIN_PATH,
  refusalOf,
  startWsUpstream,
  STREAM_PATH,
  STREAM_SCOPE,
  writeStreamPolicy,
} from '../helpers/ws-streams.js';

const SECRET = 'stream-secret-0123456789abcdef';

describe('WebSocket streams through Keygate', () => {
  let upstream: Awaited<ReturnType<typeof startWsUpstream>>;
  let gate: RunningKeygate;

  beforeAll(async () => {
    upstream = await startWsUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [
        makeKey({ apiKey: 'streamer', secret: SECRET, scopes: [STREAM_SCOPE, 'accounts:read'], owner: 'acct-1' }),
        makeKey({ apiKey: 'reader', secret: SECRET, scopes: ['accounts:read'] }),
      ],
      env: { KEYGATE_CONFIG: writeStreamPolicy() },
    });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });

  it('an authenticated upgrade opens and the upstream sees the identity headers', async () => {
    const stream = await openStream(gate.url, 'streamer', SECRET, STREAM_PATH, {
      'x-api-key-id': 'forged',
      'X-Api-Key-Owner': 'forged',
    });
    await expect.poll(() => upstream.connections.length).toBe(1);
    const conn = upstream.connections[0]!;
    expect(conn.headers['x-api-key-id']).toBe('id-streamer');
    expect(conn.headers['x-api-key-owner']).toBe('acct-1');
    expect(conn.headers.authorization).toBeUndefined();
    stream.ws.send('hello');
    await expect.poll(() => conn.received.length).toBe(1);
    conn.socket.send('back');
    await expect.poll(() => stream.received.length).toBe(1);
    expect(stream.received[0]!.data.toString()).toBe('back');
    stream.ws.close(1000);
    expect((await stream.closed).code).toBe(1000);
  });

  it('no token, and a key without the scope, are refused with the ordinary codes', async () => {
    expect(await refusalOf(openStream(gate.url, 'reader', SECRET))).toEqual({ status: 403, code: 10403 });
  });

  it('an upgrade to a route without upgrade: websocket never gets 101', async () => {
    expect(await refusalOf(openStream(gate.url, 'streamer', SECRET, PLAIN_PATH))).toEqual({ status: 400, code: 40000 });
  });
});
