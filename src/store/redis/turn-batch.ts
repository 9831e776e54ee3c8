// Tested in test/adversarial/redis-batching.test.ts.
import type { Socket } from 'node:net';
import { Command, type Redis } from 'ioredis';
import type { RedisClient } from './connection/redis-connection.js';

/** Sends one command; its reply as ioredis decodes it (utf8 strings, numbers, null). */
export type TurnSend = (name: string, args: Array<string | number>) => Promise<unknown>;

/**
 * Commands sent in one event-loop turn leave in one socket write. The
 * first command of a turn corks the connection's socket and the check phase (setImmediate,
 * after the poll phase that ran the requests) uncorks it: every command the requests of that
 * turn issued goes out in one writev, and Redis reads them in one read.
 *
 * ioredis's auto-pipelining batches the same way, but builds a Pipeline per batch, a second
 * Command and promise per command and a nextTick per reply; corking needs none of them, and Redis
 * still reads the turn's commands in one read.
 * Ordering is unchanged: commands are queued for their replies in the order they are written,
 * corked or not. A connection that is not ready fails the command at once, as before (no
 * offline queue). A Cluster has no one socket: it keeps its auto-pipelining.
 */
export function createTurnSend(client: RedisClient): TurnSend {
  if (client.isCluster) return (name, args) => client.call(name, ...args);
  const redis = client as Redis;
  let corked: Socket | undefined;
  const uncork = () => {
    const socket = corked;
    corked = undefined;
    socket?.uncork();
  };
  return (name, args) => {
    const socket = redis.stream as Socket | undefined;
    if (corked === undefined && redis.status === 'ready' && socket?.writable) {
      corked = socket;
      socket.cork();
      setImmediate(uncork);
    }
    const command = new Command(name, args, { replyEncoding: 'utf8', keyPrefix: redis.options.keyPrefix });
    void redis.sendCommand(command);
    return command.promise;
  };
}
