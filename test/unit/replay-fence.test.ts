import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createReplayFence, type FailoverCause } from '../../src/store/replay-fence.js';

const T0 = Date.parse('2026-11-25T12:00:00Z');
const ns = (ms: number) => BigInt(ms) * 1_000_000n;

function setup() {
  const clock = manualClock(T0);
  const raised: FailoverCause[] = [];
  const fence = createReplayFence({ clock, onRaise: (c) => raised.push(c) });
  return { clock, fence, raised };
}

describe('createReplayFence', () => {
  it('is down until a failover is seen, then at the moment it was seen', () => {
    const { clock, fence, raised } = setup();
    expect(fence.fenceNs()).toBe(0n);
    clock.advance(1_000);
    fence.raise('switch_master');
    expect(fence.fenceNs()).toBe(ns(T0 + 1_000));
    expect(raised).toEqual(['switch_master']);
    // A later failover moves it on; time passing alone does not (the window check takes over).
    clock.advance(5_000);
    expect(fence.fenceNs()).toBe(ns(T0 + 1_000));
    fence.raise('slots_moved');
    expect(fence.fenceNs()).toBe(ns(T0 + 6_000));
  });

  it('a reconnect raises it at once and takes it back once the server proved the same', () => {
    const { clock, fence, raised } = setup();
    fence.raise('switch_master');
    clock.advance(2_000);
    const settle = fence.raiseUntilSettled('new_master');
    expect(fence.fenceNs()).toBe(ns(T0 + 2_000));
    settle(false);
    expect(fence.fenceNs()).toBe(ns(T0)); // back to the last real failover, not to 0
    expect(raised).toEqual(['switch_master']);
  });

  it('a reconnect to another server keeps it up', () => {
    const { clock, fence, raised } = setup();
    clock.advance(2_000);
    fence.raiseUntilSettled('new_master')(true);
    expect(fence.fenceNs()).toBe(ns(T0 + 2_000));
    expect(raised).toEqual(['new_master']);
  });

  it('a failover seen while a reconnect is unsettled is never taken back', () => {
    const { clock, fence } = setup();
    const settle = fence.raiseUntilSettled('new_master');
    clock.advance(1_000);
    fence.raise('switch_master');
    settle(false);
    expect(fence.fenceNs()).toBe(ns(T0 + 1_000));
    // And a reconnect settled after a newer one leaves the newer one's fence alone.
    clock.advance(1_000);
    const first = fence.raiseUntilSettled('new_master');
    clock.advance(1_000);
    const second = fence.raiseUntilSettled('new_master');
    first(false);
    expect(fence.fenceNs()).toBe(ns(T0 + 3_000));
    second(false);
    expect(fence.fenceNs()).toBe(ns(T0 + 1_000));
  });
});
