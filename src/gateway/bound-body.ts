import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { BodyFraming } from '../pipeline/forward-headers.js';

/** The body as read, with its SHA-256 (base64url, no padding); or why it was not read whole. */
export type BoundBody =
  | { readonly ok: true; readonly bytes: Buffer; readonly sha256: string }
  | { readonly ok: false; readonly reason: 'bound_body_too_large' | 'aborted' };

/** A body declared larger than the bound: refused before a byte of it is asked for (no 100 Continue). */
export function declaredTooLarge(framing: BodyFraming, maxBytes: number): boolean {
  return typeof framing === 'number' && framing > maxBytes;
}

/**
 * Reads a request body bound by a token's body_sha256 (issue 43) into memory, hashing it as it
 * arrives, so it can be checked before anything is forwarded and then forwarded byte for byte.
 * Bounded: past `maxBytes` it stops reading at once (the rest is never buffered) and says so; the
 * caller answers 413 and closes the connection. A client that goes away, or a request the server's
 * KEYGATE_REQUEST_TIMEOUT_MS cuts, ends as `aborted`. `done` is called exactly once.
 */
export function readBoundBody(req: IncomingMessage, maxBytes: number, done: (body: BoundBody) => void): void {
  const hash = createHash('sha256');
  const chunks: Buffer[] = [];
  let size = 0;
  let settled = false;
  const finish = (body: BoundBody) => {
    if (settled) return;
    settled = true;
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onGone);
    req.off('close', onGone);
    done(body);
  };
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) {
      req.pause();
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
