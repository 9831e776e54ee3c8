import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { BodyFraming } from '../pipeline/forward-headers.js';

/** The body as read, with its SHA-256 (base64url, no padding); or why it was not read whole. */
export type BoundBody =
  | { readonly ok: true; readonly bytes: Buffer; readonly sha256: string }
  | { readonly ok: false; readonly reason: 'bound_body_too_large' | 'body_too_slow' | 'aborted' };

/** The bounds of one read: its size, and (as for a streamed body, KEYGATE_MIN_BODY_BYTES_PER_SECOND) its pace. */
export interface BoundBodyLimits {
  readonly maxBytes: number;
  /** After `graceMs`, the body must have averaged at least this many bytes per second (0: no minimum). */
  readonly minBytesPerSecond: number;
  readonly graceMs: number;
}

/** A body declared larger than the bound: refused before a byte of it is asked for (no 100 Continue). */
export function declaredTooLarge(framing: BodyFraming, maxBytes: number): boolean {
  return typeof framing === 'number' && framing > maxBytes;
}

/**
 * Reads a request body bound by a token's body_sha256 into memory, hashing it as it
 * arrives, so it can be checked before anything is forwarded and then forwarded byte for byte.
 * Bounded: past `maxBytes` it stops reading at once (the rest is never buffered) and says so; the
 * caller answers 413 and closes the connection. A body that trickles in below the minimum rate is cut
 * the same way (408 body_too_slow), so a slow client cannot hold a buffer for the whole request
 * timeout. A client that goes away, or a request the server's KEYGATE_REQUEST_TIMEOUT_MS cuts, ends as
 * `aborted`. `done` is called exactly once.
 */
export function readBoundBody(req: IncomingMessage, limits: BoundBodyLimits, done: (body: BoundBody) => void): void {
  const { maxBytes, minBytesPerSecond, graceMs } = limits;
  const hash = createHash('sha256');
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const started = performance.now();
  // One timer per bound read (they are rare: only tokens with body_sha256), checked from the grace on.
  const pace =
    minBytesPerSecond > 0
      ? setInterval(
          () => {
            const elapsed = performance.now() - started;
            if (elapsed >= graceMs && (size * 1000) / elapsed < minBytesPerSecond)
              finish({ ok: false, reason: 'body_too_slow' });
          },
          Math.max(10, Math.min(250, graceMs / 4)),
        )
      : undefined;
  pace?.unref();
  const finish = (body: BoundBody) => {
    if (settled) return;
    settled = true;
    clearInterval(pace);
    if (!body.ok && body.reason !== 'aborted') req.pause();
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onGone);
    req.off('close', onGone);
    done(body);
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) {
      return finish({ ok: false, reason: 'bound_body_too_large' });
    }
    hash.update(chunk);
    chunks.push(chunk);
  };
  const onEnd = () =>
    finish({
      ok: true,
      bytes: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size),
      sha256: hash.digest('base64url'),
    });
  const onGone = () => finish({ ok: false, reason: 'aborted' });
  req.on('data', onData);
  req.once('end', onEnd);
  req.once('error', onGone);
  // After 'end' this is a no-op (settled); before it, the client or the request timeout cut the body.
  req.once('close', onGone);
}
