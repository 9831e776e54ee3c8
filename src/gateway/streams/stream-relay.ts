// Tested in test/e2e/streams.test.ts, test/process/stream-backpressure.test.ts.
import type { Socket } from 'node:net';
import type { StreamCloseReason } from '../../observe/stream-metrics.js';
import { closeFrame, FrameTracker } from './ws-frames.js';

/** RFC 6455 §7.4.1: 1008 policy violation (the key stopped being good), 1001 going away (shutdown, idle). */
export const CLOSE_POLICY = 1008;
export const CLOSE_GOING_AWAY = 1001;

/** One direction of the relay: what it read is written on, frame boundaries tracked. */
class Direction {
  readonly tracker = new FrameTracker();
  /** Keygate's close frame has been written in this direction: nothing more is relayed. */
  injected = false;
  constructor(
    readonly from: Socket,
    readonly to: Socket,
    /** Frames toward the upstream (a server) are masked; frames toward the client are not (RFC 6455 §5.1). */
    readonly masked: boolean,
    readonly side: 'client' | 'upstream',
  ) {}
}

/**
 * The two sockets of one admitted WebSocket, joined: bytes are relayed both ways as they arrive, never
 * reframed, decoded or buffered beyond the sockets' own buffers (a full writer pauses its reader, so a
 * peer that stops reading holds at most a socket buffer on each side). Frame headers are tracked per
 * direction so that Keygate can end a stream with a close frame of its own (revocation, shutdown, idle)
 * at a frame boundary, never inside a frame; a direction that reaches no boundary within `graceMs`, or a
 * peer that does not take the close, is cut at the TCP level.
 */
export class StreamRelay {
  /** performance.now() of the last byte relayed in either direction (the registry's idle sweep reads it). */
  lastActive = performance.now();
  /** Set once: the first cause the stream ended by. */
  reason: StreamCloseReason | undefined;
  private readonly up: Direction;
  private readonly down: Direction;
  private closing: { code: number; text: string } | undefined;
  private firstCloseFrame: 'client' | 'upstream' | undefined;
  private cutTimer: NodeJS.Timeout | undefined;
  private closedSockets = 0;
  /** Called once, when both sockets have closed, with the first cause (the registry sets it). */
  onEnd: (reason: StreamCloseReason) => void = () => {};

  constructor(
    readonly client: Socket,
    readonly upstream: Socket,
    private readonly graceMs: number,
  ) {
    this.up = new Direction(client, upstream, true, 'client');
    this.down = new Direction(upstream, client, false, 'upstream');
  }

  /** Joins the sockets; `fromClient`/`fromUpstream` are bytes each side sent past its handshake head. */
  start(fromClient: Buffer, fromUpstream: Buffer): void {
    for (const d of [this.up, this.down]) {
      d.from.on('error', () => this.cut(d.side));
      d.from.on('end', () => this.ended(d));
      d.from.on('close', () => this.socketClosed(d));
    }
    if (fromUpstream.length > 0) this.relay(this.down, fromUpstream);
    if (fromClient.length > 0) this.relay(this.up, fromClient);
    this.up.from.on('data', (chunk: Buffer) => this.relay(this.up, chunk));
    this.down.from.on('data', (chunk: Buffer) => this.relay(this.down, chunk));
    this.client.resume();
    this.upstream.resume();
  }

  /**
   * Ends the stream from Keygate's side: a close frame with `code` to both peers (each at its
   * direction's next frame boundary), then the TCP connections; whatever is left after `graceMs` is cut.
   */
  close(code: number, text: string, reason: StreamCloseReason): void {
    if (this.closing !== undefined || this.closedSockets === 2) return;
    this.reason ??= reason;
    this.closing = { code, text };
    for (const d of [this.up, this.down]) if (d.tracker.atBoundary) this.inject(d);
    this.cutTimer = setTimeout(() => this.destroyBoth(), this.graceMs);
    this.cutTimer.unref();
  }

  private relay(d: Direction, chunk: Buffer) {
    this.lastActive = performance.now();
    if (this.closing !== undefined) {
      if (d.injected) return;
      // Only what completes the frame under way goes on; then Keygate's close frame; the rest is dropped.
      const at = d.tracker.scan(chunk, 0, true);
      if (at > 0) d.to.write(chunk.subarray(0, at));
      if (d.tracker.atBoundary) this.inject(d);
      return;
    }
    d.tracker.scan(chunk);
    if (d.tracker.sawClose) this.firstCloseFrame ??= d.side;
    if (!d.to.write(chunk)) {
      // Backpressure: stop reading this side until the other has taken what it was given.
      d.from.pause();
      d.to.once('drain', () => d.from.resume());
    }
  }

  private inject(d: Direction) {
    if (d.injected || d.to.destroyed) return;
    const { code, text } = this.closing as { code: number; text: string };
    d.injected = true;
    d.to.end(closeFrame(code, text, d.masked));
    // Nothing more is relayed toward `to`; keep draining `from` so it sees its close answered.
    d.from.resume();
  }

  /** One side finished sending: pass the end on, unless Keygate is closing (it ends both itself). */
  private ended(d: Direction) {
    this.reason ??= this.firstCloseFrame ?? d.side;
    if (this.closing === undefined && !d.to.destroyed) d.to.end();
    this.armCut();
  }

  private socketClosed(d: Direction) {
    this.reason ??= this.firstCloseFrame ?? d.side;
    this.closedSockets++;
    if (this.closedSockets === 1) {
      // The other side gets what is queued for it, then its FIN; cut if it lingers.
      if (!d.to.destroyed) d.to.end();
      this.armCut();
      return;
    }
    clearTimeout(this.cutTimer);
    this.onEnd(this.reason);
  }

  private cut(side: 'client' | 'upstream') {
    this.reason ??= this.firstCloseFrame ?? side;
    this.destroyBoth();
  }

  private armCut() {
    if (this.cutTimer !== undefined) return;
    this.cutTimer = setTimeout(() => this.destroyBoth(), this.graceMs);
    this.cutTimer.unref();
  }

  private destroyBoth() {
    this.client.destroy();
    this.upstream.destroy();
  }
}
