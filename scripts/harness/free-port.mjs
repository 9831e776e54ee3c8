// @ts-check
// Loopback ports for processes that must be told their port up front (a child `keygate serve`,
// redis-server, nginx). In-process servers listen on port 0 instead. Shared by the tests and the
// benchmark/soak scripts: plain ESM with JSDoc types, no dependency, no test framework.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * A port handed out here is never one the kernel hands out, nor one another process of the harness hands out:
 *  - it lies below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), where `listen(0)` and
 *    outgoing connections take their ports. A port found free with `listen(0)` and closed again could be given to
 *    the next `listen(0)` of any process before the child it was meant for had bound it: `keygate demo`'s upstream
 *    (port 0) once took the admin port chosen for the same child;
 *  - it is claimed by holding an abstract Unix socket named after it (Linux) for the life of this process: binding a
 *    name is atomic, another test worker's claim of the same port fails, and the kernel drops the name when its
 *    process ends however it ends, so nothing is left to clean up.
 */
const LOWEST = 10_000;

/** @returns {number} the first port of the kernel's ephemeral range */
function ephemeralStart() {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > LOWEST + 1_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Ports handed out: [LOWEST, END). */
export const HARNESS_PORTS_END = ephemeralStart();

/** The claims this process holds (port → its abstract socket), kept open until it exits. */
const claims = new Map();

/**
 * Claims `port` for this process: true when no process of the harness holds it (this one included) and nothing
 * listens on it now. A port claimed stays claimed.
 * @param {number} port
 * @returns {Promise<boolean>}
 */
export async function claimPort(port) {
  if (claims.has(port)) return false;
  const holder = createServer();
  const held = await new Promise((resolve) => {
    holder.once('error', () => resolve(false));
    holder.listen(`\0keygate-harness-port-${port}`, () => resolve(true));
  });
  if (!held) return false;
  holder.unref();
  claims.set(port, holder);
  if (await portIsFree(port)) return true;
  // Bound by something else (a service of this machine): left claimed, never tried again.
  return false;
}

/**
 * A TCP port on 127.0.0.1, below the kernel's ephemeral range and below `below` (default: that range's start),
 * that nothing listens on now and that no process of the harness has claimed (see above).
 * @param {{ below?: number }} [options]
 * @returns {Promise<number>}
 */
export async function freePort(options = {}) {
  const end = Math.min(options.below ?? HARNESS_PORTS_END, HARNESS_PORTS_END);
  if (end <= LOWEST) throw new Error(`freePort: no port below ${end} to hand out`);
  for (;;) {
    const port = LOWEST + Math.floor(Math.random() * (end - LOWEST));
    if (await claimPort(port)) return port;
  }
}

/**
 * Whether `port` on 127.0.0.1 can be bound now (a Redis cluster node also needs port + 10000 for its bus).
 * @param {number} port
 * @returns {Promise<boolean>}
 */
export function portIsFree(port) {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}
