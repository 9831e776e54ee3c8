// @ts-check
// A TCP relay that can hold back a replication link, shared by the tests (through
// scripts/harness/redis-topology.mjs) and the benchmark scripts. Plain ESM with JSDoc types.
import { createServer, connect } from 'node:net';

/**
 * A TCP relay to 127.0.0.1:`targetPort` that can hold back what the target sends on replication
 * links, as a slow link would: a replica connected through it lags its master for as long as the
 * relay holds. Only connections that spoke REPLCONF/PSYNC (a replica's) are held; the others
 * (sentinel, clients) pass freely, so the master does not look down.
 * @typedef {object} TcpRelay
 * @property {number} port
 * @property {() => void} hold stop passing the target's bytes on (they are kept, in order)
 * @property {() => void} release pass on what was kept and everything after
 * @property {() => number} held bytes held back right now
 * @property {() => Promise<void>} close
 */

/**
 * @param {number} targetPort
 * @returns {Promise<TcpRelay>}
 */
export async function startTcpRelay(targetPort) {
  let holding = false;
  /** @type {Set<{ client: import('node:net').Socket, target: import('node:net').Socket, kept: Buffer[], replication: boolean }>} */
  const pairs = new Set();
  const server = createServer((client) => {
    const target = connect(targetPort, '127.0.0.1');
    /** @type {Buffer[]} */
    const kept = [];
    const pair = { client, target, kept, replication: false };
    pairs.add(pair);
    client.on('data', (/** @type {Buffer} */ b) => {
      if (!pair.replication && /REPLCONF|PSYNC/i.test(b.toString('latin1'))) pair.replication = true;
      target.write(b);
    });
    target.on('data', (/** @type {Buffer} */ b) => (holding && pair.replication ? pair.kept.push(b) : client.write(b)));
    // The target gone: what it sent and the relay still held is lost with it, as on a real link.
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      target.destroy();
    };
    for (const s of [client, target]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const port = /** @type {import('node:net').AddressInfo} */ (server.address()).port;
  return {
    port,
    hold: () => {
      holding = true;
    },
    release: () => {
      holding = false;
      for (const p of pairs) for (const b of p.kept.splice(0)) p.client.write(b);
    },
    held: () => [...pairs].reduce((n, p) => n + p.kept.reduce((m, b) => m + b.length, 0), 0),
    close: async () => {
      for (const p of pairs) {
        p.client.destroy();
        p.target.destroy();
      }
      await new Promise((resolve) => server.close(() => resolve(undefined)));
    },
  };
}
