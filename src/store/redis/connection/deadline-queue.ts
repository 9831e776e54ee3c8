/** One call under a deadline: `expire` runs once if the call is not settled in time. */
export interface TrackedCall {
  /** When it expires: Infinity until the end of the loop turn that made it (see createDeadlineQueue). */
  deadline: number;
  settled: boolean;
  readonly expire: () => void;
}

export interface DeadlineQueue {
  /** Tracks a call; its deadline starts at the end of this loop turn; `expire` fails it if settle() has not been called by then. */
  track(expire: () => void): TrackedCall;
  /** Marks the call settled; false when its deadline already expired it (drop the late answer). */
  settle(call: TrackedCall): boolean;
  /**
   * Runs `fn` under the deadline: its result if it settles in time, else a rejection with
   * `toError(undefined, true)`; its own failure becomes `toError(err, false)`. `then` maps a
   * result that came in time (what it throws rejects as is): one promise per call instead of a
   * `.then` chain after it (the request path's admit).
   */
  run<T>(fn: () => Promise<T>, toError: (err: unknown, timedOut: boolean) => Error): Promise<T>;
  run<T, R>(
    fn: () => Promise<T>,
    toError: (err: unknown, timedOut: boolean) => Error,
    then: (value: T) => R,
  ): Promise<R>;
  /**
   * The same for a call answered through a callback (turn-batch.ts's nonce SET): `start` gets the
   * callback, and the call's one promise is the only one (no promise from the call itself).
   */
  runCallback<T, R>(
    start: (done: (err: Error | undefined, value: T) => void) => void,
    toError: (err: unknown, timedOut: boolean) => Error,
    then: (value: T) => R,
  ): Promise<R>;
  /** Calls tracked and not yet settled or expired (tests, diagnostics). */
  inFlight(): number;
}

/**
 * Deadlines for every Redis call in flight with one timer instead of one each (a
 * setTimeout, clearTimeout and setImmediate per call showed in the request path's profile).
 *
 * Every call gets the same deadline, so calls expire in the order they started: a FIFO whose
 * head is the next to expire. One timer is armed for the head; when it fires, expiry waits one
 * setImmediate (after the poll phase), so replies that already arrived are read and settle
 * their calls first: a reply Redis sent in time is used even when the loop was too busy to read
 * it on time ("never blame a healthy store"), and a call Redis did not answer fails within its
 * deadline plus one loop turn, as with a timer per call. Settled calls leave the queue lazily.
 *
 * The deadline starts at the end of the loop turn that made the call (one setImmediate stamps every
 * call of the turn), not at the call: the commands of a turn reach Redis by then (ioredis writes at
 * the call, turn-batch.ts in that same check phase), and the rest of a turn is this process's own
 * work. Past KEYGATE_MAX_IN_FLIGHT one poll phase can serve tens of thousands of fast refusals on
 * keep-alive connections; a deadline that started at the call ran out before the admitted requests'
 * commands were even written, and a healthy Redis was blamed (503 store_unavailable).
 */
export function createDeadlineQueue(options: { deadlineMs: number }, deps: { now?: () => number } = {}): DeadlineQueue {
  const now = deps.now ?? (() => performance.now());
  let queue: Array<TrackedCall | undefined> = [];
  let head = 0;
  let live = 0;
  let timer: NodeJS.Timeout | undefined;
  let sweeping = false;
  /** Calls from this index on were made in the current turn and have no deadline yet. */
  let unstamped = 0;
  let stamping = false;

  function arm() {
    while (head < queue.length && (queue[head] as TrackedCall).settled) queue[head++] = undefined;
    if (head === queue.length) {
      queue = [];
      head = 0;
      unstamped = 0;
      return;
    }
    // Drop the consumed front now and then, so the array does not grow for ever.
    if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head);
      unstamped -= head;
      head = 0;
    }
    // Not stamped yet: the stamp at the end of this turn arms the timer.
    if (unstamped <= head) unstamped = head;
    if (head === unstamped) return;
    const next = queue[head] as TrackedCall;
    timer = setTimeout(onTimer, Math.max(0, next.deadline - now()));
    timer.unref();
  }

  function onTimer() {
    timer = undefined;
    sweeping = true;
    setImmediate(sweep);
  }

  function sweep() {
    sweeping = false;
    const t = now();
    while (head < queue.length) {
      const call = queue[head] as TrackedCall;
      if (!call.settled) {
        if (call.deadline > t) break;
        call.settled = true;
        live--;
        call.expire();
      }
      queue[head++] = undefined;
    }
    arm();
  }

  /** The end of a turn that made calls: their deadlines start now, in the order they were made. */
  function stamp() {
    stamping = false;
    const deadline = now() + options.deadlineMs;
    for (let i = Math.max(unstamped, head); i < queue.length; i++) (queue[i] as TrackedCall).deadline = deadline;
    unstamped = queue.length;
    if (timer === undefined && !sweeping) arm();
  }

  function track(expire: () => void): TrackedCall {
    const call: TrackedCall = { deadline: Infinity, settled: false, expire };
    queue.push(call);
    live++;
    if (!stamping) {
      stamping = true;
      setImmediate(stamp);
    }
    return call;
  }
  function settle(call: TrackedCall): boolean {
    if (call.settled) return false;
    call.settled = true;
    live--;
    return true;
  }

  return {
    track,
    settle,
    run<T, R>(fn: () => Promise<T>, toError: (err: unknown, timedOut: boolean) => Error, then?: (value: T) => R) {
      return new Promise<R>((resolve, reject) => {
        const call = track(() => reject(toError(undefined, true)));
        fn().then(
          (value) => {
            if (!settle(call)) return;
            if (then === undefined) return resolve(value as unknown as R);
            try {
              resolve(then(value));
            } catch (err) {
              reject(err instanceof Error ? err : new Error(String(err))); // as a .then after the call would
            }
          },
          (err: unknown) => {
            if (settle(call)) reject(toError(err, false));
          },
        );
      });
    },
    runCallback<T, R>(
      start: (done: (err: Error | undefined, value: T) => void) => void,
      toError: (err: unknown, timedOut: boolean) => Error,
      then: (value: T) => R,
    ) {
      return new Promise<R>((resolve, reject) => {
        const call = track(() => reject(toError(undefined, true)));
        start((err, value) => {
          if (!settle(call)) return;
          if (err !== undefined) return reject(toError(err, false));
          try {
            resolve(then(value));
          } catch (e) {
            reject(e instanceof Error ? e : new Error(String(e)));
          }
        });
      });
    },
    inFlight: () => live,
  };
}
