import { createHash, randomBytes } from 'node:crypto';

/** RFC 6455 §1.3: the GUID a server appends to Sec-WebSocket-Key before hashing it into Sec-WebSocket-Accept. */
const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
/** A Sec-WebSocket-Key is 16 random bytes in base64: exactly 24 characters, two of them padding. */
const WS_KEY = /^[A-Za-z0-9+/]{22}==$/;

export const OPCODE_CLOSE = 0x8;

/** Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (RFC 6455 §4.2.2). */
export function acceptFor(key: string): string {
  return createHash('sha1')
    .update(key + WS_GUID)
    .digest('base64');
}

export function isWebSocketKey(key: string): boolean {
  return WS_KEY.test(key) && Buffer.from(key, 'base64').length === 16;
}

/**
 * A close frame (RFC 6455 §5.5.1): status code and a short UTF-8 reason. Frames toward a server
 * (Keygate → upstream) must be masked (§5.3); frames toward a client must not be.
 */
export function closeFrame(code: number, reason: string, masked: boolean): Buffer {
  const text = Buffer.from(reason, 'utf8').subarray(0, 123);
  const payload = Buffer.alloc(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  const head = Buffer.from([0x80 | OPCODE_CLOSE, (masked ? 0x80 : 0) | payload.length]);
  if (!masked) return Buffer.concat([head, payload]);
  const mask = randomBytes(4);
  for (let i = 0; i < payload.length; i++) payload[i] = (payload[i] as number) ^ (mask[i & 3] as number);
  return Buffer.concat([head, mask, payload]);
}

/**
 * Where the frames of one direction of a WebSocket begin and end, read from their headers only
 * (FIN/opcode, mask bit, payload length): payloads are counted, never buffered, never decoded. The
 * relay needs nothing more: a close frame Keygate injects must start at a frame boundary, never inside
 * another frame (control frames may sit between the fragments of a message, RFC 6455 §5.4).
 */
export class FrameTracker {
  /** Payload bytes of the current frame still to come. */
  private remaining = 0;
  /** The header being read (at most 14 bytes: 2 + 8 of extended length + 4 of mask). */
  private readonly header = Buffer.alloc(14);
  private have = 0;
  private need = 2;
  /** The opcode of the first close frame seen in this direction, if any. */
  sawClose = false;
  /** Set once the bytes cannot be WebSocket frames (a length past 2^53): no boundary can be trusted any more. */
  broken = false;

  /** True between two frames: nothing of a frame has been seen that has not fully passed. */
  get atBoundary(): boolean {
    return this.remaining === 0 && this.have === 0 && !this.broken;
  }

  /**
   * Reads `chunk` from `from`. With `stopAtBoundary`, stops at the first frame boundary reached after
   * `from` (not at `from` itself) and returns its offset; otherwise reads it all and returns its length.
   */
  scan(chunk: Buffer, from = 0, stopAtBoundary = false): number {
    let i = from;
    const len = chunk.length;
    while (i < len && !this.broken) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, len - i);
        this.remaining -= take;
        i += take;
        if (this.remaining === 0 && stopAtBoundary) return i;
        continue;
      }
      this.header[this.have++] = chunk[i++] as number;
      if (this.have === 2) {
        const b1 = this.header[1] as number;
        const len7 = b1 & 0x7f;
        this.need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (b1 & 0x80 ? 4 : 0);
      }
      if (this.have >= 2 && this.have === this.need) {
        this.startFrame();
        if (this.remaining === 0 && stopAtBoundary) return i;
      }
    }
    return len;
  }

  private startFrame() {
    const h = this.header;
    if (((h[0] as number) & 0x0f) === OPCODE_CLOSE) this.sawClose = true;
    const len7 = (h[1] as number) & 0x7f;
    if (len7 === 126) this.remaining = h.readUInt16BE(2);
    else if (len7 === 127) {
      const high = h.readUInt32BE(2);
      // The most significant bit must be 0 (§5.2); past 2^53 a length is not a number we can count down.
      if (high > 0x1fffff) {
        this.broken = true;
        return;
      }
      this.remaining = high * 0x1_0000_0000 + h.readUInt32BE(6);
    } else this.remaining = len7;
    this.have = 0;
    this.need = 2;
  }
}
