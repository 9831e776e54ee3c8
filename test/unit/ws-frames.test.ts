import { describe, expect, it } from 'vitest';
import { acceptFor, closeFrame, FrameTracker, isWebSocketKey } from '../../src/gateway/streams/ws-frames.js';
import { wsFrame } from '../helpers/ws-frames.js';

/** One frame as a peer writes it: random payload bytes, 7-, 16- or 64-bit length, masked or not. */
const frame = (opcode: number, length: number, masked: boolean, fin = true) => wsFrame(opcode, length, { masked, fin });

describe('FrameTracker', () => {
  const cases = [
    ['a short text frame, unmasked', [frame(1, 5, false)]],
    ['a short frame, masked', [frame(1, 5, true)]],
    ['an empty frame', [frame(1, 0, true)]],
    ['a 16-bit length', [frame(2, 300, true)]],
    ['a 64-bit length', [frame(2, 70_000, false)]],
    ['fragments with a ping between them', [frame(2, 3, true, false), frame(9, 4, true), frame(0, 2, true)]],
    ['a close frame', [frame(8, 2, true)]],
  ] as const;

  it.each(cases)('%s: at a boundary after each frame, whatever the chunking', (_name, frames) => {
    const all = Buffer.concat(frames);
    const ends = new Set<number>();
    let at = 0;
    for (const f of frames) ends.add((at += f.length));
    // Every split size, from byte by byte to the whole: atBoundary holds exactly at frame ends.
    // Every chunk is checked; the misses are collected and compared once per split (one expect() per chunk of a
    // 70,000-byte frame read byte by byte cost seconds of matcher overhead).
    for (const size of [1, 2, 3, 7, 13, all.length]) {
      const t = new FrameTracker();
      const misses: Array<{ from: number; scanned: number; atBoundary: boolean }> = [];
      for (let from = 0; from < all.length; from += size) {
        const chunk = all.subarray(from, Math.min(all.length, from + size));
        const scanned = t.scan(chunk);
        if (scanned !== chunk.length || t.atBoundary !== ends.has(from + chunk.length))
          misses.push({ from, scanned, atBoundary: t.atBoundary });
      }
      expect(misses, `split every ${size} bytes`).toEqual([]);
    }
  });

  it('with stopAtBoundary, stops where the frame under way ends', () => {
    const first = frame(1, 10, true);
    const second = frame(2, 20, true);
    const t = new FrameTracker();
    // Half of the first frame has passed already.
    t.scan(first.subarray(0, 8));
    expect(t.atBoundary).toBe(false);
    const rest = Buffer.concat([first.subarray(8), second]);
    expect(t.scan(rest, 0, true)).toBe(first.length - 8);
    expect(t.atBoundary).toBe(true);
  });

  it('sees a close frame go by', () => {
    const t = new FrameTracker();
    t.scan(frame(1, 3, true));
    expect(t.sawClose).toBe(false);
    t.scan(frame(8, 2, true));
    expect(t.sawClose).toBe(true);
  });

  it('a length past 2^53 breaks the tracker: no boundary is trusted after it', () => {
    const head = Buffer.from([0x82, 0x7f, 0xff, 0, 0, 0, 0, 0, 0, 1]);
    const t = new FrameTracker();
    t.scan(head);
    expect(t.broken).toBe(true);
    expect(t.atBoundary).toBe(false);
  });
});

describe('closeFrame', () => {
  it('toward a client: unmasked, code and reason', () => {
    const f = closeFrame(1008, 'key revoked', false);
    expect(f[0]).toBe(0x88);
    expect(f[1]).toBe(2 + 'key revoked'.length);
    expect(f.readUInt16BE(2)).toBe(1008);
    expect(f.subarray(4).toString()).toBe('key revoked');
  });
  it('toward a server: masked (RFC 6455 §5.3), and unmasks to the same payload', () => {
    const f = closeFrame(1001, 'shutting down', true);
    expect(f[0]).toBe(0x88);
    expect(f[1]! & 0x80).toBe(0x80);
    const mask = f.subarray(2, 6);
    const payload = Buffer.from(f.subarray(6).map((b, i) => b ^ mask[i & 3]!));
    expect(payload.readUInt16BE(0)).toBe(1001);
    expect(payload.subarray(2).toString()).toBe('shutting down');
    const t = new FrameTracker();
    t.scan(f);
    expect(t.atBoundary).toBe(true);
  });
});

describe('handshake values', () => {
  it('Sec-WebSocket-Accept is RFC 6455’s worked example', () => {
    expect(acceptFor('dGhlIHNhbXBsZSBub25jZQ==')).toBe('s3pPLMBiTxaQ9kYGzzhZRbK+xOo=');
  });
  it.each([
    ['dGhlIHNhbXBsZSBub25jZQ==', true],
    ['dGhlIHNhbXBsZSBub25jZQ', false],
    ['dGhlIHNhbXBsZSBub25jZQ=', false],
    ['c2hvcnQ=', false],
    ['dGhlIHNhbXBsZSBub25jZQ==\r', false],
  ])('key %j well-formed: %s', (key, ok) => {
    expect(isWebSocketKey(key)).toBe(ok);
  });
});
