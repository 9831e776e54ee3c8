import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { token } from '../helpers/tokens.js';
import { exchange } from '../helpers/raw-socket.js';
import { closeCodeOf, wsFrame } from '../helpers/ws-frames.js';
import {
  openStream,
  PLAIN_PATH,
  rawHandshake,
  refusalOf,
  startRawUpstream,
  startWsUpstream,
  STREAM_PATH,
  STREAM_SCOPE,
  writeStreamPolicy,
} from '../helpers/ws-streams.js';

const SECRET = 'stream-secret-0123456789abcdef';
const keys = () => [
  makeKey({ apiKey: 'streamer', secret: SECRET, scopes: [STREAM_SCOPE, 'accounts:read'], owner: 'acct-1' }),
  makeKey({ apiKey: 'limited', secret: SECRET, scopes: [STREAM_SCOPE] }),
  makeKey({ apiKey: 'reader', secret: SECRET, scopes: ['accounts:read'] }),
];

describe('WebSocket streams through Keygate', () => {
  let upstream: Awaited<ReturnType<typeof startWsUpstream>>;
  let gate: RunningKeygate;

  beforeAll(async () => {
    upstream = await startWsUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      keys: keys(),
      env: { KEYGATE_CONFIG: writeStreamPolicy(), KEYGATE_MAX_STREAMS_PER_KEY: '2' },
    });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });

  const metric = async (series: string) => {
    const text = await (await fetch(`${gate.adminUrl}/metrics`)).text();
    return Number(
      text
        .split('\n')
        .find((l) => l.startsWith(`${series} `))
        ?.split(' ')[1],
    );
  };

  it('an authenticated upgrade opens, the upstream sees the identity headers Keygate set, and messages flow both ways', async () => {
    const stream = await openStream(gate.url, 'streamer', SECRET, STREAM_PATH, {
      'x-api-key-id': 'forged',
      'X-Api-Key-Owner': 'forged',
      'X-Keygate-Assertion': 'forged',
    });
    await expect.poll(() => upstream.connections.length).toBe(1);
    const conn = upstream.connections[0]!;
    expect(conn.headers['x-api-key-id']).toBe('id-streamer');
    expect(conn.headers['x-api-key-owner']).toBe('acct-1');
    expect(conn.headers['x-keygate-assertion']).toBeUndefined();
    expect(conn.headers.authorization).toBeUndefined();
    expect(conn.rawHeaders.filter((h) => h.toLowerCase() === 'x-api-key-id')).toHaveLength(1);
    expect(await metric('keygate_open_streams')).toBe(1);

    stream.ws.send('hello');
    stream.ws.send(Buffer.from([0, 1, 2, 255]));
    // A fragmented text message: two frames, FIN on the second.
    stream.ws.send('frag', { fin: false });
    stream.ws.send('mented', { fin: true });
    await expect.poll(() => conn.received.length).toBe(3);
    expect(conn.received.map((m) => [m.data.toString('hex'), m.isBinary])).toEqual([
      [Buffer.from('hello').toString('hex'), false],
      ['000102ff', true],
      [Buffer.from('fragmented').toString('hex'), false],
    ]);
    conn.socket.send('back');
    conn.socket.send(Buffer.alloc(70_000, 7));
    await expect.poll(() => stream.received.length).toBe(2);
    expect(stream.received[0]!.data.toString()).toBe('back');
    expect(stream.received[1]!.data.equals(Buffer.alloc(70_000, 7))).toBe(true);

    // Ping/pong both ways: answered by the far end, through Keygate.
    const pong = new Promise<Buffer>((resolve) => stream.ws.once('pong', resolve));
    stream.ws.ping('are-you-there');
    expect((await pong).toString()).toBe('are-you-there');
    const upstreamPong = new Promise<Buffer>((resolve) => conn.socket.once('pong', resolve));
    conn.socket.ping('and-you');
    expect((await upstreamPong).toString()).toBe('and-you');

    stream.ws.close(1000, 'bye');
    expect((await stream.closed).code).toBe(1000);
    expect(await conn.closed).toBe(1000);
    await expect.poll(() => metric('keygate_open_streams')).toBe(0);
    await expect.poll(() => metric('keygate_streams_closed_total{reason="client"}')).toBe(1);
  });

  it('relays the bytes of every frame unchanged, whatever the chunking (raw sockets on both ends)', async () => {
    const raw = await startRawUpstream();
    const g = await startKeygate({ upstream: raw.url, keys: keys(), env: { KEYGATE_CONFIG: writeStreamPolicy() } });
    try {
      const client = await rawHandshake(g.port, STREAM_PATH, token('streamer', SECRET));
      const upSocket = await raw.connected;
      // Client → upstream: masked text, a binary message in two fragments with a ping between them, a 300-byte frame.
      const toUpstream = Buffer.concat([
        wsFrame(0x1, Buffer.from('hello'), { fin: true, masked: true }),
        wsFrame(0x2, Buffer.from([1, 2, 3]), { fin: false, masked: true }),
        wsFrame(0x9, Buffer.from('ping'), { fin: true, masked: true }),
        wsFrame(0x0, Buffer.from([4, 5]), { fin: true, masked: true }),
        wsFrame(0x2, randomBytes(300), { fin: true, masked: true }),
      ]);
      // Sent in awkward pieces: one byte, then splits inside headers and payloads.
      for (const [from, to] of [
        [0, 1],
        [1, 9],
        [9, 30],
        [30, toUpstream.length],
      ] as const) {
        client.socket.write(toUpstream.subarray(from, to));
        await new Promise((r) => setTimeout(r, 20));
      }
      await expect.poll(() => Buffer.concat(raw.received).length).toBe(toUpstream.length);
      expect(Buffer.concat(raw.received).equals(toUpstream)).toBe(true);
      // Upstream → client: unmasked frames, including a 64-bit length.
      const toClient = Buffer.concat([
        wsFrame(0x1, Buffer.from('welcome'), { fin: true, masked: false }),
        wsFrame(0xa, Buffer.from('pong'), { fin: true, masked: false }),
        wsFrame(0x2, randomBytes(70_000), { fin: true, masked: false }),
      ]);
      upSocket.write(toClient);
      await expect.poll(() => Buffer.concat(client.received).length).toBe(toClient.length);
      expect(Buffer.concat(client.received).equals(toClient)).toBe(true);
      client.socket.destroy();
    } finally {
      await g.close();
      await raw.close();
    }
  });

  it.each(['toward the upstream', 'toward the client'] as const)(
    'a close Keygate injects waits for the frame under way %s to end, and nothing after it is relayed',
    async (direction) => {
      const raw = await startRawUpstream();
      const g = await startKeygate({
        upstream: raw.url,
        keys: keys(),
        // A grace long enough that the frame under way can end before anything is cut (the test ends it
        // within milliseconds), and short enough that closing this Keygate, which may wait it out, ends in time.
        env: { KEYGATE_CONFIG: writeStreamPolicy(), KEYGATE_STREAM_CLOSE_GRACE_MS: '10000' },
      });
      try {
        const client = await rawHandshake(g.port, STREAM_PATH, token('streamer', SECRET));
        const upSocket = await raw.connected;
        const toUpstream = direction === 'toward the upstream';
        // The frame under way: masked from the client, unmasked from the upstream; its second half held back.
        const underWay = wsFrame(0x2, randomBytes(40), { fin: true, masked: toUpstream });
        const after = wsFrame(0x1, Buffer.from('must not pass'), { fin: true, masked: toUpstream });
        const [sender, senderGot, receiverGot] = toUpstream
          ? [client.socket, client.received, raw.received]
          : [upSocket, client.received, client.received];
        sender.write(underWay.subarray(0, 10));
        await expect.poll(() => Buffer.concat(receiverGot).length).toBe(10);
        const ops = createKeyOperations({ store: g.keygate.store, now: () => Date.now(), audit: () => {} });
        expect((await ops.revoke('streamer', 'test', 'test')).ok).toBe(true);
        // The other direction is at a frame boundary: its close frame goes out at once (the signal that
        // Keygate is closing); the sender's own direction holds its close until the frame ends.
        const otherSide = toUpstream ? senderGot : raw.received;
        await expect.poll(() => Buffer.concat(otherSide).length).toBeGreaterThan(0);
        expect(closeCodeOf(Buffer.concat(otherSide), !toUpstream)).toBe(1008);
        expect(Buffer.concat(receiverGot).length).toBe(10);
        sender.write(Buffer.concat([underWay.subarray(10), after]));
        const expected = underWay.length + (toUpstream ? 8 : 4) + 'key revoked'.length;
        await expect.poll(() => Buffer.concat(receiverGot).length).toBe(expected);
        const got = Buffer.concat(receiverGot);
        expect(got.subarray(0, underWay.length).equals(underWay)).toBe(true);
        expect(closeCodeOf(got.subarray(underWay.length), toUpstream)).toBe(1008);
      } finally {
        await g.close();
        await raw.close();
      }
    },
  );

  it('a replayed token, no token and a key without the scope are refused with the ordinary codes; nothing reaches the upstream', async () => {
    const before = upstream.handshakes.length;
    const replayed = token('streamer', SECRET);
    const first = await openStream(gate.url, 'streamer', SECRET, STREAM_PATH, { authorization: `Bearer ${replayed}` });
    expect(upstream.handshakes.length).toBe(before + 1);
    expect(
      await refusalOf(openStream(gate.url, 'streamer', SECRET, STREAM_PATH, { authorization: `Bearer ${replayed}` })),
    ).toEqual({ status: 401, code: 40106 });
    expect(await refusalOf(openStream(gate.url, 'streamer', SECRET, STREAM_PATH, { authorization: '' }))).toEqual({
      status: 401,
      code: 40004,
    });
    expect(await refusalOf(openStream(gate.url, 'reader', SECRET))).toEqual({ status: 403, code: 10403 });
    expect(upstream.handshakes.length).toBe(before + 1);
    expect(await metric('keygate_upgrade_refusals_total{code="40106"}')).toBe(1);
    expect(await metric('keygate_upgrade_refusals_total{code="10403"}')).toBe(1);
    first.ws.close();
    await first.closed;
  });

  it('an upgrade to a route without upgrade: websocket never gets 101, nor does another protocol or a malformed handshake', async () => {
    const before = upstream.handshakes.length;
    expect(await refusalOf(openStream(gate.url, 'streamer', SECRET, PLAIN_PATH))).toEqual({
      status: 400,
      code: 40000,
    });
    // Another protocol is no stream: forwarded as plain HTTP without Upgrade (the ws upstream answers 426 itself).
    const h2c = (
      await exchange(
        gate.port,
        `GET ${STREAM_PATH} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n` +
          `HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nAuthorization: Bearer ${token('streamer', SECRET)}\r\n\r\n`,
      )
    ).text;
    expect(h2c).toMatch(/^HTTP\/1\.1 426 /);
    // A malformed WebSocket handshake is refused before authentication.
    const noKey = (
      await exchange(
        gate.port,
        `GET ${STREAM_PATH} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      )
    ).text;
    expect(noKey).toMatch(/^HTTP\/1\.1 400 /);
    expect(noKey).toContain('"code":40000');
    expect(upstream.handshakes.length).toBe(before);
  });

  it('a key holds at most KEYGATE_MAX_STREAMS_PER_KEY streams (429 10429); a closed one frees its slot', async () => {
    const one = await openStream(gate.url, 'limited', SECRET);
    const two = await openStream(gate.url, 'limited', SECRET);
    expect(await refusalOf(openStream(gate.url, 'limited', SECRET))).toEqual({ status: 429, code: 10429 });
    // Another key is not limited by this one's streams.
    const other = await openStream(gate.url, 'streamer', SECRET);
    one.ws.close();
    await one.closed;
    await expect.poll(() => metric('keygate_open_streams')).toBe(2);
    const three = await openStream(gate.url, 'limited', SECRET);
    for (const s of [two, three, other]) s.ws.close();
    await Promise.all([two.closed, three.closed, other.closed]);
  });

  it('a stream idle past KEYGATE_STREAM_IDLE_TIMEOUT_MS is closed with 1001', async () => {
    const g = await startKeygate({
      upstream: upstream.url,
      keys: keys(),
      env: { KEYGATE_CONFIG: writeStreamPolicy(), KEYGATE_STREAM_IDLE_TIMEOUT_MS: '1000' },
    });
    try {
      const stream = await openStream(g.url, 'streamer', SECRET);
      const opened = Date.now();
      const closed = await stream.closed;
      expect(closed.code).toBe(1001);
      expect(closed.at - opened).toBeGreaterThanOrEqual(1000);
    } finally {
      await g.close();
    }
  });

  it('shutdown closes open streams with 1001, to the client and to the upstream', async () => {
    const g = await startKeygate({
      upstream: upstream.url,
      keys: keys(),
      env: { KEYGATE_CONFIG: writeStreamPolicy() },
    });
    const before = upstream.connections.length;
    const stream = await openStream(g.url, 'streamer', SECRET);
    await expect.poll(() => upstream.connections.length).toBe(before + 1);
    const conn = upstream.connections[before]!;
    await g.close();
    expect((await stream.closed).code).toBe(1001);
    expect(await conn.closed).toBe(1001);
  });
});
