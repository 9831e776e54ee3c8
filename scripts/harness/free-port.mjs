// @ts-check
// Loopback ports for processes that must be told their port up front (a child `keygate serve`,
// redis-server, nginx). In-process servers listen on port 0 instead. Shared by the tests and the
// benchmark/soak scripts: plain ESM with JSDoc types, no dependency, no test framework.
import { createServer } from 'node:net';

/**
 * Ports this process has handed out: the kernel may give a port just closed to the next `listen(0)`,
 * so two calls in a row (a proxy port and an admin port) could otherwise name the same port before
 * either child has bound it (seen once in CI: `KEYGATE_ADMIN_PORT: must differ from KEYGATE_PORT`).
 */
const handedOut = new Set();

/**
 * A TCP port on 127.0.0.1 that nothing listens on right now and that this process has not handed out before.
 * @returns {Promise<number>}
 */
export async function freePort() {
  for (;;) {
    const port = await unboundPort();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

/** @returns {Promise<number>} */
function unboundPort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
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
