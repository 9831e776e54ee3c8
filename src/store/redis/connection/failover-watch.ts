// Tested in test/e2e/failover-watch.test.ts, test/e2e/replay-fence.test.ts.
import { Cluster } from 'ioredis';
import type { Logger } from 'pino';
import type { RedisClient } from './redis-connection.js';
import type { FailoverCause, ReplayFence } from '../../replay-fence.js';

/**
 * Raises the replay fence (replay-fence.ts) whenever the connection that admits nonces may have
 * moved to a master that lacks some of them. Each trigger raises the fence synchronously, before
 * any command can reach the new master (the authenticator checks the fence again on the answer):
 *   one server / Sentinel: every reconnect of the command connection raises it at once and takes it
 *     back down when INFO shows the same run_id as before (a dropped connection, not a new server);
 *     Sentinel's +switch-master is handled where it is heard (redis-store.ts);
 *   Cluster: a slots refresh (ioredis emits "refresh" right after installing the new table) that
 *     shows any slot with another master than before, and a MOVED redirect, which ioredis follows
 *     at once, before its own refresh.
 * Returns a function that stops watching.
 */
export function watchFailovers(
  client: RedisClient,
  fence: ReplayFence,
  deps: { logger: Logger; runIdOf: () => Promise<string> },
): () => void {
  const raised = (cause: FailoverCause) => deps.logger.warn({ cause }, 'redis failover seen: replay fence raised');
  if (client instanceof Cluster) return watchCluster(client, fence, raised);

  let runId: string | undefined;
  const onReady = () => {
    const settle = runId === undefined ? undefined : fence.raiseUntilSettled('new_master');
    deps.runIdOf().then(
      (id) => {
        const moved = runId !== undefined && id !== runId;
        runId = id;
        settle?.(moved);
        if (moved) raised('new_master');
      },
      // Unknown: the fence stays (fail closed); the next reconnect compares with the last id known.
      () => settle?.(true),
    );
  };
  client.on('ready', onReady);
  return () => void client.off('ready', onReady);
}

function watchCluster(cluster: Cluster, fence: ReplayFence, raised: (cause: FailoverCause) => void): () => void {
  let masters: Array<string | undefined> | undefined;
  const onRefresh = () => {
    const now = cluster.slots.map((nodes) => nodes[0]);
    const before = masters;
    masters = now;
    if (before === undefined) return;
    for (let slot = 0; slot < now.length; slot++)
      if (now[slot] !== before[slot] && now[slot] !== undefined) {
        fence.raise('slots_moved');
        return raised('slots_moved');
      }
  };
  cluster.on('refresh', onRefresh);
  // ioredis has no event for MOVED: it updates its slot table and re-sends the command to the new
  // node straight away, before its refresh. Wrapped on this instance only; the typings declare it.
  const original = cluster.handleError.bind(cluster);
  cluster.handleError = (error, ttl, handlers) => {
    if (error.message.startsWith('MOVED ')) {
      fence.raise('moved');
      raised('moved');
    }
    return original(error, ttl, handlers);
  };
  return () => {
    cluster.off('refresh', onRefresh);
    cluster.handleError = original;
  };
}
