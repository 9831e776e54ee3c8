// @ts-check
// Loopback ports for processes that must be told their port up front (a child `keygate serve`,
// redis-server, nginx). In-process servers listen on port 0 instead. Shared by the tests and the
// benchmark/soak scripts: plain ESM with JSDoc types, no dependency, no test framework.
import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that nothing listens on right now.
 * @returns {Promise<number>}
 */
export function freePort() {
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
