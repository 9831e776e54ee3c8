import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  startSubscriberHeartbeat,
  type SubscriberHeartbeat,
} from '../../src/store/redis/connection/subscriber-heartbeat.js';

/** The heartbeat on fake timers: `deliver` decides whether a published heartbeat reaches the subscriber. */
function setup(deliver: () => boolean, publishOk: () => boolean = () => true) {
  const calls = { lost: 0, heard: 0, published: 0, ticks: 0 };
  let hb: SubscriberHeartbeat | undefined = undefined;
  hb = startSubscriberHeartbeat(
    { intervalMs: 1_000, misses: 3, mark: 'me' },
    {
      publish: (message) => {
        calls.published++;
        if (!publishOk()) return Promise.reject(new Error('timeout'));
        if (deliver()) queueMicrotask(() => hb!.heard(message));
        return Promise.resolve(1);
      },
      onLost: () => calls.lost++,
      onHeard: () => calls.heard++,
      onTick: () => calls.ticks++,
    },
  );
  return { hb, calls };
}
const tick = async (n: number) => {
  for (let i = 0; i < n; i++) await vi.advanceTimersByTimeAsync(1_000);
};

describe('startSubscriberHeartbeat', () => {
  afterEach(() => vi.useRealTimers());

  it('a subscriber that hears its heartbeats is never declared lost', async () => {
    vi.useFakeTimers();
    const { hb, calls } = setup(() => true);
    await tick(10);
    // Every interval also runs what rides on the heartbeat (the keystore's epoch marker is read).
    expect(calls).toEqual({ lost: 0, heard: 0, published: 10, ticks: 10 });
    hb.stop();
  });

  it('3 heartbeats published and not heard in a row: lost, again every 3 while silent, heard once it comes back', async () => {
    vi.useFakeTimers();
    let delivering = true;
    const { hb, calls } = setup(() => delivering);
    await tick(3);
    delivering = false;
    await tick(3);
    expect(calls.lost).toBe(0);
    await tick(1);
    expect(calls.lost).toBe(1);
    await tick(3);
    expect(calls.lost).toBe(2);
    delivering = true;
    await tick(1);
    expect(calls.heard).toBe(1);
    await tick(5);
    expect(calls).toMatchObject({ lost: 2, heard: 1 });
    hb.stop();
  });

  it('a heartbeat whose PUBLISH failed counts as unheard (it may have gone to the node that hangs)', async () => {
    vi.useFakeTimers();
    const { hb, calls } = setup(
      () => false,
      () => false,
    );
    await tick(4);
    expect(calls.lost).toBe(1);
    hb.stop();
  });

  it("another process's heartbeat is a heartbeat (no key change) but proves nothing about ours", () => {
    const { hb, calls } = setup(() => false);
    expect(hb.heard('~heartbeat:other:1')).toBe(true);
    expect(hb.heard('kg_some-key')).toBe(false);
    expect(hb.heard('*')).toBe(false);
    expect(calls.heard).toBe(0);
    hb.stop();
  });
});
