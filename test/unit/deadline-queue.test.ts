import { createServer, connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createDeadlineQueue } from '../../src/store/redis/connection/deadline-queue.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};
const toError = (err: unknown, timedOut: boolean) => (timedOut ? new Error('deadline') : (err as Error));

describe('createDeadlineQueue: one timer for every call in flight', () => {
  afterEach(() => vi.restoreAllMocks());

  it('expires each unsettled call once, never before its deadline; settled calls never; a late answer is dropped', async () => {
    const q = createDeadlineQueue({ deadlineMs: 30 });
    const expired: Array<[number, number]> = []; // call, ms after its start
    const start = (i: number) => {
      const t0 = performance.now();
      return q.track(() => expired.push([i, performance.now() - t0]));
    };
    const calls = [0, 1, 2, 3].map(start);
    expect(q.settle(calls[1]!)).toBe(true);
    expect(q.settle(calls[1]!)).toBe(false); // settled once
    await sleep(5);
    const late = start(4);
    await expect.poll(() => expired.map(([i]) => i), { timeout: 5_000, interval: 2 }).toEqual([0, 2, 3, 4]);
    for (const [, ms] of expired) expect(ms).toBeGreaterThanOrEqual(29);
    expect(q.settle(late)).toBe(false); // the answer came after the deadline: the caller drops it
    expect(q.settle(calls[0]!)).toBe(false);
    expect(q.inFlight()).toBe(0);
  });

  it('arms one timer for a thousand calls in flight, not one each', async () => {
    const spy = vi.spyOn(globalThis, 'setTimeout');
    const q = createDeadlineQueue({ deadlineMs: 1_000 });
    const calls = Array.from({ length: 1_000 }, () => q.track(() => {}));
    await new Promise((r) => setImmediate(r)); // the deadlines start at the end of the turn that made the calls
    expect(spy).toHaveBeenCalledTimes(1);
    for (const c of calls) q.settle(c);
    expect(q.inFlight()).toBe(0);
  });

  it('run(): the value when settled in time, the error mapped when it fails, the deadline error when it hangs', async () => {
    const q = createDeadlineQueue({ deadlineMs: 20 });
    await expect(q.run(() => Promise.resolve(7), toError)).resolves.toBe(7);
    await expect(q.run(() => Promise.reject(new Error('boom')), toError)).rejects.toThrow('boom');
    const t0 = performance.now();
    await expect(q.run(() => new Promise(() => {}), toError)).rejects.toThrow('deadline');
    expect(performance.now() - t0).toBeGreaterThanOrEqual(19);
  });

  it('run() with `then`: maps a result that came in time, rejects with what it throws, never runs after the deadline', async () => {
    const q = createDeadlineQueue({ deadlineMs: 20 });
    await expect(
      q.run(
        () => Promise.resolve(6),
        toError,
        (x) => x * 7,
      ),
    ).resolves.toBe(42);
    await expect(
      q.run(
        () => Promise.resolve(1),
        toError,
        () => {
          throw new Error('bad reply');
        },
      ),
    ).rejects.toThrow('bad reply');
    await expect(
      q.run(
        () => Promise.reject(new Error('boom')),
        toError,
        () => 'mapped',
      ),
    ).rejects.toThrow('boom');
    let mapped = 0;
    let answer: (v: number) => void = () => {};
    const late = q.run(
      () => new Promise<number>((r) => (answer = r)),
      toError,
      (x) => (mapped += x),
    );
    await expect(late).rejects.toThrow('deadline');
    answer(1); // the reply after the deadline is dropped, unmapped
    await sleep(5);
    expect(mapped).toBe(0);
  });

  it('a reply that arrived in time is used even when the loop was too busy to read it before the deadline', async () => {
    // A real socket pair: the reply is in the kernel's buffer before the deadline, but the loop is
    // blocked past it. The timer fires first; expiry waits for the poll phase, which reads the reply.
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const accepted = new Promise<Socket>((r) => server.once('connection', r));
    const client = connect((server.address() as { port: number }).port, '127.0.0.1');
    await new Promise((r) => client.once('connect', r));
    const peer = await accepted;
    try {
      const q = createDeadlineQueue({ deadlineMs: 20 });
      const reply = q.run(() => new Promise<string>((r) => client.once('data', (d) => r(String(d)))), toError);
      const silent = q.run(() => new Promise<string>(() => {}), toError); // the control: nothing comes
      await new Promise((r) => setImmediate(r)); // the end of the turn that made the calls: their deadlines start
      peer.write('pong');
      busy(80); // the deadline passes while the reply waits to be read
      await expect(reply).resolves.toBe('pong');
      await expect(silent).rejects.toThrow('deadline');
    } finally {
      client.destroy();
      peer.destroy();
      server.close();
    }
  });

  it('the deadline starts at the end of the turn that made the call: a long turn (a poll phase of refusals) is not time the store took', async () => {
    const q = createDeadlineQueue({ deadlineMs: 1_000 });
    const expired: string[] = [];
    const answered = q.track(() => expired.push('answered'));
    const silent = q.track(() => expired.push('silent')); // the control: never answered
    busy(1_500); // this turn outlasts the deadline before its commands could even be written
    // The store answers 20 ms after the turn ended: well within its deadline.
    await sleep(20);
    expect(q.settle(answered)).toBe(true);
    await expect.poll(() => expired, { timeout: 10_000, interval: 5 }).toEqual(['silent']);
    expect(q.settle(silent)).toBe(false);
  });
});
