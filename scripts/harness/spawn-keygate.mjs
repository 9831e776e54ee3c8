// @ts-check
// Keygate as a child process (the built CLI: bin/keygate.js runs dist/), shared by the tests
// (test/helpers/spawn-keygate.ts adds log-line parsing and /proc readings) and the benchmark/soak
// scripts. The child is plain Keygate: nothing of this module or of a test framework is loaded in it.
//   runKeygate    one CLI command to its end (`keys import`, `token`, ...): its stdout and stderr
//   spawnKeygate  a command as it is started, nothing waited for
//   serveKeygate  `keygate serve` (or `demo`) on free loopback ports, resolved once /healthz answers
import { closeSync, openSync, readFileSync } from 'node:fs';
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { freePort } from './free-port.mjs';

/** This repository's bin/keygate.js. */
export const KEYGATE_BIN = fileURLToPath(new URL('../../bin/keygate.js', import.meta.url));

/** @typedef {Record<string, string | undefined>} ChildEnv Variables on top of the base environment; `undefined` removes one. */
/** @typedef {{ code: number | null, signal: NodeJS.Signals | null, at: number }} Exit */
/**
 * @typedef {object} SpawnOptions
 * @property {'inherit' | 'clean'} [baseEnv] this process's environment (default), or PATH alone as in a container
 * @property {ChildEnv} [env]
 * @property {string} [bin] another tree's bin/keygate.js (a baseline build, an image layout); default this repository's
 * @property {string} [cwd]
 * @property {string[]} [nodeArgs] options for node itself, before the script (--cpu-prof, --trace-gc: NODE_OPTIONS refuses those)
 * @property {string} [log] a file for stdout and stderr. Default: pipes, read into memory. A benchmark
 *   passes a file: it blocks while load runs, and an undrained pipe makes Keygate's logger buffer lines
 *   in memory (a real log shipper drains), distorting RSS.
 */
/**
 * @typedef {object} KeygateChild
 * @property {import('node:child_process').ChildProcess} child
 * @property {number} pid
 * @property {() => string} stdout what it wrote to stdout so far (with `log`: the log file)
 * @property {() => string} stderr what it wrote to stderr so far ('' with `log`: it is in the file)
 * @property {() => string} output stdout and stderr, for failure messages
 * @property {Promise<Exit>} exited
 * @property {(signal?: NodeJS.Signals) => Promise<Exit>} stop sends `signal` (SIGTERM by default), SIGKILL after 5 s
 */
/** @typedef {KeygateChild & { port: number, adminPort: number, url: string, adminUrl: string }} ServedKeygate */

/**
 * @param {'inherit' | 'clean'} base
 * @param {ChildEnv} env
 * @returns {NodeJS.ProcessEnv}
 */
export function childEnv(base, env) {
  /** @type {NodeJS.ProcessEnv} */
  const out = base === 'inherit' ? { ...process.env } : { PATH: process.env.PATH ?? '' };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete out[name];
    else out[name] = value;
  }
  return out;
}

const execFileAsync = promisify(execFile);

/**
 * Runs one CLI command with this environment plus `env`, `input` on its stdin (then closed; none by
 * default); rejects (with stdout, stderr and code) when it exits non-zero.
 * @param {string[]} args
 * @param {ChildEnv} [env]
 * @param {string} [input]
 * @param {{ bin?: string, cwd?: string, baseEnv?: 'inherit' | 'clean' }} [options]
 * @returns {Promise<{ stdout: string, stderr: string }>}
 */
export function runKeygate(args, env = {}, input, options = {}) {
  const run = execFileAsync(process.execPath, [options.bin ?? KEYGATE_BIN, ...args], {
    env: childEnv(options.baseEnv ?? 'inherit', env),
    ...(options.cwd && { cwd: options.cwd }),
  });
  run.child.stdin?.end(input);
  return run;
}

/**
 * `keygate <args>` as a child process, returned at once.
 * @param {string[]} args
 * @param {SpawnOptions} [options]
 * @returns {KeygateChild}
 */
export function spawnKeygate(args, options = {}) {
  const fd = options.log === undefined ? undefined : openSync(options.log, 'w');
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), options.bin ?? KEYGATE_BIN, ...args], {
    env: childEnv(options.baseEnv ?? 'inherit', options.env ?? {}),
    ...(options.cwd && { cwd: options.cwd }),
    stdio: fd === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', fd, fd],
  });
  if (fd !== undefined) closeSync(fd);
  let out = '';
  let err = '';
  child.stdout?.on('data', (/** @type {Buffer} */ c) => (out += c.toString()));
  child.stderr?.on('data', (/** @type {Buffer} */ c) => (err += c.toString()));
  const log = options.log;
  const stdout = log === undefined ? () => out : () => readFileSync(log, 'utf8');
  /** @type {Promise<Exit>} */
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  return {
    child,
    pid: /** @type {number} */ (child.pid),
    stdout,
    stderr: () => err,
    output: () => `${stdout()}\n${err}`,
    exited,
    stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
      }
      return exited;
    },
  };
}

/**
 * `keygate serve` (or `args`, e.g. ['demo']) as an operator runs it, on free ports of 127.0.0.1, with
 * no Redis and no keys file unless `env` names them. Resolves once `readyPath` on the admin port
 * answers 2xx (/healthz by default: Keygate opens the proxy port first); rejects with the process's
 * output if it exits or is not ready within `timeoutMs`.
 * @param {ChildEnv} env
 * @param {SpawnOptions & { args?: string[], readyPath?: string, timeoutMs?: number }} [options]
 * @returns {Promise<ServedKeygate>}
 */
export async function serveKeygate(env, options = {}) {
  const { args = ['serve'], readyPath = '/healthz', timeoutMs = 15_000, ...spawnOptions } = options;
  const port = await freePort();
  const adminPort = await freePort();
  const p = spawnKeygate(args, {
    ...spawnOptions,
    env: {
      KEYGATE_HOST: '127.0.0.1',
      KEYGATE_ADMIN_HOST: '127.0.0.1',
      KEYGATE_REDIS_URL: '',
      KEYGATE_KEYS_FILE: '',
      ...env,
      KEYGATE_PORT: String(port),
      KEYGATE_ADMIN_PORT: String(adminPort),
    },
  });
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (p.child.exitCode !== null || p.child.signalCode !== null)
      throw new Error(`keygate exited at start:\n${p.output()}`);
    if (Date.now() > deadline) {
      await p.stop('SIGKILL');
      throw new Error(`keygate did not become ready (${readyPath}):\n${p.output()}`);
    }
    const ready = await fetch(`${adminUrl}${readyPath}`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return { ...p, port, adminPort, url: `http://127.0.0.1:${port}`, adminUrl };
}
