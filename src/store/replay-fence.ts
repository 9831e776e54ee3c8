import type { Clock } from '../clock.js';

/** What made Keygate see a failover (logged with the fence). */
export type FailoverCause =
  | 'switch_master' // Sentinel announced +switch-master for our master
  | 'new_master' // the command connection came back to a server with another run_id
  | 'slots_moved' // Cluster: a slots refresh shows a slot served by another master
  | 'moved' // Cluster: a MOVED redirect sent a command to another node
  | 'keystore_emptied'; // the keystore's epoch marker was gone: FLUSHDB/FLUSHALL (redis/keystore-epoch.ts)

export interface ReplayFence {
  /**
   * Nonces (ns since the epoch, the token's clock) below this are refused as `fenced`: the moment
   * this instance last saw a failover, on its own clock; 0n when it has seen none.
   */
  fenceNs(): bigint;
  /** A failover was seen: from now on every nonce older than this moment is refused. */
  raise(cause: FailoverCause): void;
  /**
   * A reconnect that may or may not be a failover: the fence goes up now (before the first
   * command on the new connection can admit a nonce) and `settle(false)` takes it back down
   * once the server proved to be the same one, unless a real failover was seen meanwhile.
   */
  raiseUntilSettled(cause: FailoverCause): (failover: boolean) => void;
}

/**
 * The replay fence. A nonce admitted on a Redis master shortly before it failed may
 * never have reached the replica that takes over: the new master does not know it, so the token
 * would pass the replay guard a second time. Every nonce older than the moment this instance
 * switched to the new master is therefore refused (40106, X-Server-Time, as for the nonce window:
 * a client retries with a fresh token). Such a nonce is only inside its recv_window for at most
 * maxRecvWindow after the switch, so the fence costs refusals for at most that long and needs no
 * timer: the window check (which runs first) refuses the same tokens afterwards.
 * The moment is this instance's clock, the same clock the window is judged on, so no skew between
 * instances enters: each instance fences on the moment it itself switched.
 */
export function createReplayFence(deps: { clock: Clock; onRaise?: (cause: FailoverCause) => void }): ReplayFence {
  let fenceNs = 0n;
  // Raised by a failover that was not taken back: raiseUntilSettled never lowers below it.
  let confirmedNs = 0n;
  return {
    fenceNs: () => fenceNs,
    raise(cause) {
      fenceNs = confirmedNs = deps.clock.nowNs();
      deps.onRaise?.(cause);
    },
    raiseUntilSettled(cause) {
      fenceNs = deps.clock.nowNs();
      const raised = fenceNs;
      return (failover) => {
        if (failover) {
          if (raised > confirmedNs) confirmedNs = raised;
          deps.onRaise?.(cause);
        } else if (fenceNs === raised) fenceNs = confirmedNs;
      };
    },
  };
}
