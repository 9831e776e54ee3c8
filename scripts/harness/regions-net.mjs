// @ts-check
// Simulated regions on one machine: one network namespace per region, joined through the delay line
// (scripts/harness/delay-line.py: a TUN device per namespace, each packet passed on after its link's one-way
// delay, links cut and healed on command). The root namespace (this process, the load generator, the test) has
// an address on the same subnet with no delay to any region. Processes started with exec() run inside a
// region's namespace at low priority and stop by themselves at the deadline. Needs root (namespaces, TUN).
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const DELAY_LINE = fileURLToPath(new URL('./delay-line.py', import.meta.url));

/** Nice level of every process started here: the machine is shared. */
export const NICE = '10';

/** The root namespace's host number on the regions' subnet (the load generator's address). */
const ROOT_HOST = 100;

/**
 * Sends `signal` to a process started with exec() and to what it runs: SIGKILL reaches the child of timeout(1)
 * only through its process group (timeout leads one of its own).
 * @param {import('node:child_process').ChildProcess} p
 * @param {NodeJS.Signals} signal
 */
export function killGroup(p, signal) {
  try {
    if (p.pid !== undefined) process.kill(-p.pid, signal);
  } catch {
    p.kill(signal);
  }
}

/**
 * Why the regions cannot be built here, or undefined when they can.
 * @returns {string | undefined}
 */
export function regionsNetUnavailable() {
  if (process.getuid?.() !== 0)
    return 'the simulated regions need root: they create network namespaces (ip netns add) and TUN devices (/dev/net/tun). Run as root (CI does).';
  for (const [tool, args, pkg] of /** @type {const} */ ([
    ['ip', ['-V'], 'iproute2'],
    ['python3', ['--version'], 'python3'],
  ])) {
    if (spawnSync(tool, args, { stdio: 'ignore' }).status !== 0)
      return `${tool} is not on PATH: the simulated regions need it (apt-get install -y ${pkg}).`;
  }
  return undefined;
}

/**
 * @typedef {object} RegionsNet
 * @property {readonly string[]} regions
 * @property {(region: string) => string} address the region's address (its services listen there)
 * @property {string} rootAddress this namespace's address on the subnet (no delay to any region)
 * @property {(region: string) => string} netns the region's namespace name
 * @property {(a: string, b: string) => number} delayMs one-way delay between two regions
 * @property {(region: string, command: string, args: string[], options?: { stdio?: import('node:child_process').StdioOptions, env?: NodeJS.ProcessEnv, cwd?: string }) => import('node:child_process').ChildProcess} exec
 *   `command args` inside the region's namespace, niced, killed at the deadline
 * @property {(a: string, b: string) => Promise<void>} cut drop everything between two regions, both ways, silently
 * @property {(a: string, b: string) => Promise<void>} heal
 * @property {(region: string) => Promise<void>} isolate cut the region from every other region (not from this namespace)
 * @property {(region: string) => Promise<void>} rejoin heal every link isolate() cut
 * @property {() => Promise<{ passed: Record<string, number>, dropped: Record<string, number>, cut: string[] }>} stats packets per link ("a-b")
 * @property {number} deadlineAt epoch ms at which everything stops by itself
 * @property {() => Promise<void>} stop removes the namespaces and devices (processes started with exec are the caller's to stop first)
 */

/**
 * A subnet 10.77.x (x from this pid) that no interface of this namespace uses yet.
 * @returns {string}
 */
function freeSubnet() {
  const taken = spawnSync('ip', ['-o', '-4', 'addr'], { encoding: 'utf8' }).stdout ?? '';
  for (let i = 0; i < 250; i++) {
    const subnet = `10.77.${(process.pid + i) % 250}`;
    if (!taken.includes(` ${subnet}.`)) return subnet;
  }
  throw new Error('no free 10.77.x subnet');
}

/**
 * Builds the namespaces and starts the delay line.
 * @param {{ regions: string[], delaysMs: Record<string, number>, deadlineSeconds: number, log?: (line: string) => void }} options
 *   `delaysMs`: one-way delay per region pair, keyed "a-b"; `deadlineSeconds`: everything stops by itself then
 * @returns {Promise<RegionsNet>}
 */
export async function startRegionsNet(options) {
  const why = regionsNetUnavailable();
  if (why) throw new Error(why);
  const { regions, delaysMs, deadlineSeconds } = options;
  if (regions.some((r) => !/^[a-z][a-z0-9]{0,4}$/.test(r)))
    throw new Error('region names: a lower-case letter then up to 4 letters or digits');
  const prefix = `kg${process.pid % 100_000}`;
  const subnet = freeSubnet();
  const hosts = new Map(regions.map((r, i) => [r, i + 1]));
  const config = {
    prefix,
    subnet,
    deadlineSeconds,
    nodes: [...regions.map((r) => ({ name: r, host: hosts.get(r) })), { name: 'root', host: ROOT_HOST, netns: false }],
    delays: delaysMs,
  };
  const deadlineAt = Date.now() + deadlineSeconds * 1000;
  const child = spawn('nice', ['-n', NICE, 'python3', DELAY_LINE, JSON.stringify(config)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (/** @type {Buffer} */ c) => (stderr += c.toString()));
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  /** @type {Array<(line: string) => void>} */
  const waiting = [];
  const exited = new Promise((resolve) => child.once('exit', resolve));
  /** @type {Promise<void>} */
  const ready = new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`delay line exited (${code}) before it was ready: ${stderr}`)));
    waiting.push((line) =>
      line.startsWith('ready ') ? resolve() : reject(new Error(`delay line: ${line}\n${stderr}`)),
    );
  });
  lines.on('line', (line) => waiting.shift()?.(line));
  await ready;

  /** @param {string} line @returns {Promise<string>} */
  const command = (line) =>
    new Promise((resolve, reject) => {
      if (child.exitCode !== null || child.signalCode !== null)
        return reject(new Error(`delay line has exited: ${stderr}`));
      waiting.push((answer) =>
        answer.startsWith('error') ? reject(new Error(`delay line: ${answer}`)) : resolve(answer),
      );
      child.stdin?.write(`${line}\n`);
    });
  const known = (/** @type {string} */ r) => {
    if (!hosts.has(r)) throw new Error(`no region ${r}`);
    return r;
  };
  /** @param {string} r */
  const netns = (r) => `${prefix}-${known(r)}`;
  return {
    regions,
    address: (r) => `${subnet}.${hosts.get(known(r))}`,
    rootAddress: `${subnet}.${ROOT_HOST}`,
    netns,
    delayMs: (a, b) => (a === b ? 0 : (delaysMs[`${a}-${b}`] ?? delaysMs[`${b}-${a}`] ?? 0)),
    exec: (region, cmd, args, execOptions = {}) => {
      const left = Math.max(1, Math.ceil((deadlineAt - Date.now()) / 1000));
      // timeout(1) ends it at the deadline (SIGKILL 5 s after SIGTERM) even if this process is gone.
      return spawn(
        'ip',
        ['netns', 'exec', netns(region), 'nice', '-n', NICE, 'timeout', '-k', '5', String(left), cmd, ...args],
        { stdio: execOptions.stdio ?? 'ignore', env: execOptions.env ?? process.env, cwd: execOptions.cwd },
      );
    },
    cut: async (a, b) => void (await command(`cut ${known(a)} ${known(b)}`)),
    heal: async (a, b) => void (await command(`heal ${known(a)} ${known(b)}`)),
    isolate: async (r) => void (await command(`isolate ${known(r)}`)),
    rejoin: async (r) => void (await command(`rejoin ${known(r)}`)),
    stats: async () => JSON.parse((await command('stats')).slice('stats '.length)),
    deadlineAt,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.stdin?.end('quit\n');
        const killer = setTimeout(() => child.kill('SIGTERM'), 5_000);
        await exited;
        clearTimeout(killer);
      }
    },
  };
}

// A TCP echo server, and a client that times `rounds` one-byte round trips to it (printing them as JSON), or
// prints {"error": ...} when the connection or an echo does not come within `timeoutMs`.
const ECHO_SERVER = `require('node:net').createServer((s) => { s.on('data', (b) => s.write(b)); s.on('error', () => {}); }).listen(Number(process.argv[1]), process.argv[2], () => console.log('listening'));`;
const ECHO_CLIENT = `
const [host, port, rounds, timeoutMs] = process.argv.slice(1);
const s = require('node:net').connect(Number(port), host);
const rtts = [];
const fail = (error) => { console.log(JSON.stringify({ error })); process.exit(0); };
const timer = setTimeout(() => fail('timeout'), Number(timeoutMs));
s.on('error', (e) => fail(e.code ?? String(e)));
s.setNoDelay(true);
let sent = 0;
const ping = () => { sent = performance.now(); s.write('x'); };
s.on('connect', ping);
s.on('data', () => {
  rtts.push(performance.now() - sent);
  if (rtts.length < Number(rounds)) return ping();
  clearTimeout(timer);
  console.log(JSON.stringify({ rtts }));
  s.destroy();
});`;

/**
 * Times one-byte TCP round trips from a process in region `from` to an echo server in region `to`.
 * @param {RegionsNet} net
 * @param {string} from
 * @param {string} to
 * @param {{ rounds?: number, timeoutMs?: number, port?: number }} [options]
 * @returns {Promise<{ rtts?: number[], error?: string }>}
 */
export async function echoRoundTrips(net, from, to, options = {}) {
  const { rounds = 5, timeoutMs = 5_000, port = 7007 } = options;
  const server = net.exec(to, process.execPath, ['-e', ECHO_SERVER, String(port), net.address(to)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise((resolve, reject) => {
      server.stdout?.once('data', resolve);
      server.once('exit', (code) => reject(new Error(`echo server in ${to} exited (${code})`)));
    });
    return await runIn(net, from, [
      '-e',
      ECHO_CLIENT,
      net.address(to),
      String(port),
      String(rounds),
      String(timeoutMs),
    ]);
  } finally {
    killGroup(server, 'SIGKILL');
  }
}

/**
 * @param {RegionsNet} net
 * @param {string} region
 * @param {string[]} args
 * @returns {Promise<{ rtts?: number[], error?: string }>}
 */
function runIn(net, region, args) {
  const p = net.exec(region, process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout?.on('data', (/** @type {Buffer} */ c) => (out += c.toString()));
  return new Promise((resolve) =>
    p.once('exit', () => {
      try {
        resolve(JSON.parse(out));
      } catch {
        resolve({ error: `no answer (${out.trim()})` });
      }
    }),
  );
}
