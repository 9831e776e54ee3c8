import { randomBytes } from 'node:crypto';

/**
 * One WebSocket frame as a peer writes it (RFC 6455 §5.2): 7-, 16- or 64-bit length; masked with a random
 * key when `masked` (a client's frames must be, §5.3). `payload`: the bytes, or a length of random bytes.
 * The one frame builder of the suite (test/unit/ws-frames.test.ts, test/e2e/streams.test.ts).
 */
export function wsFrame(opcode: number, payload: Buffer | number, options: { masked: boolean; fin?: boolean }): Buffer {
  const body = typeof payload === 'number' ? randomBytes(payload) : payload;
  const len = body.length;
  const head = [((options.fin ?? true) ? 0x80 : 0) | (opcode & 0x0f)];
  const m = options.masked ? 0x80 : 0;
  let ext = Buffer.alloc(0);
  if (len < 126) head.push(m | len);
  else if (len < 65_536) {
    head.push(m | 126);
    ext = Buffer.alloc(2);
    ext.writeUInt16BE(len);
  } else {
    head.push(m | 127);
    ext = Buffer.alloc(8);
    ext.writeBigUInt64BE(BigInt(len));
  }
  if (!options.masked) return Buffer.concat([Buffer.from(head), ext, body]);
  const mask = randomBytes(4);
  const masked = Buffer.from(body.map((b, i) => b ^ (mask[i & 3] as number)));
  return Buffer.concat([Buffer.from(head), ext, mask, masked]);
}

/** The status code of the close frame `bytes` starts with; throws when they start with anything else. */
export function closeCodeOf(bytes: Buffer, masked: boolean): number {
  if (bytes[0] !== 0x88) throw new Error(`not a close frame: first byte ${bytes[0]}`);
  if (Boolean(bytes[1]! & 0x80) !== masked) throw new Error(`close frame ${masked ? 'not ' : ''}masked`);
  if (!masked) return bytes.readUInt16BE(2);
  const mask = bytes.subarray(2, 6);
  return ((bytes[6]! ^ mask[0]!) << 8) | (bytes[7]! ^ mask[1]!);
}
