// @ts-check
// A TCP relay that can hold back a replication link, shared by the tests (through
// scripts/harness/redis-topology.mjs) and the benchmark scripts. Plain ESM with JSDoc types.
import { spawn } from 'node:child_process';
import { createServer, connect } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

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

/**
 * The same relay in a process of its own, for a relay a sentinel watches the master through: a relay living in the
 * test's process passed nothing while that process was busy (two Keygates, the test, a loaded machine), and a
 * sentinel with down-after-milliseconds 1000 failed the master over by itself before the test killed it (a 2.5 s
 * stall of the relay's process does it every time). Controlled by lines on its stdin; it ends with its parent.
 * @typedef {object} RelayProcess
 * @property {number} port
 * @property {() => Promise<void>} hold as TcpRelay's, done when the relay holds
 * @property {() => Promise<void>} release
 * @property {() => Promise<number>} held
 * @property {() => Promise<void>} close
 */

/**
 * @param {number} targetPort
 * @returns {Promise<RelayProcess>}
 */
export async function startTcpRelayProcess(targetPort) {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), String(targetPort)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  /** @type {Array<(line: string) => void>} */
  const waiting = [];
  /** @type {(err: Error) => void} */
  let fail = () => {};
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.once('exit', (code, signal) => fail(new Error(`tcp relay process ended (${code ?? signal})`)));
  lines.on('line', (line) => waiting.shift()?.(line));
  /** @type {Promise<unknown>} */
  let last = Promise.resolve();
  /** One command at a time, answered by one line. @param {string} command @returns {Promise<string>} */
  const ask = (command) => {
    const answer = last.then(
      () =>
        new Promise((resolve, reject) => {
          fail = reject;
          waiting.push(resolve);
          /** @type {import('node:stream').Writable} */ (child.stdin).write(`${command}\n`);
        }),
    );
    last = answer.catch(() => {});
    return /** @type {Promise<string>} */ (answer);
  };
  const port = Number(
    await new Promise((resolve, reject) => {
      fail = reject;
      waiting.push(resolve);
    }),
  );
  return {
    port,
    hold: async () => void (await ask('hold')),
    release: async () => void (await ask('release')),
    held: async () => Number(await ask('held')),
    close: async () => {
      /** @type {import('node:stream').Writable} */ (child.stdin).end();
      await exited;
    },
  };
}

// Run as a process (startTcpRelayProcess): prints its port, then answers one line per command on stdin; ends with it.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const relay = await startTcpRelay(Number(process.argv[2]));
  process.stdout.write(`${relay.port}\n`);
  const commands = createInterface({ input: process.stdin });
  commands.on('line', (command) => {
    if (command === 'hold') relay.hold();
    else if (command === 'release') relay.release();
    process.stdout.write(`${command === 'held' ? relay.held() : 'ok'}\n`);
  });
  commands.on('close', () => void relay.close().then(() => process.exit(0)));
}
