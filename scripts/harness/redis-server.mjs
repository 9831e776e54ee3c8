// @ts-check
// A throwaway redis-server on a free loopback port, shared by the tests (test/helpers/redis-server.ts
// adds the suite's rules on top) and the benchmark/soak scripts. AOF on (--appendonly yes, fsync every
// second) and no RDB snapshots by default: Keygate refuses key changes a restart could undo (issue 46);
// `persistence: 'none'` for a test about what a restart without persistence forgets. It can be killed,
// frozen (SIGSTOP) and restarted on the same port (from its own directory: AOF and dump are kept).
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './free-port.mjs';

/**
 * @typedef {object} RedisServer
 * @property {number} port
 * @property {string} url redis://127.0.0.1:port
 * @property {() => number | undefined} pid the running server's pid (undefined while killed)
 * @property {() => Promise<void>} kill SIGKILL, resolved once it has exited
 * @property {() => Promise<void>} start (re)starts it on the same port, resolved once it answers PING
 * @property {() => void} pause SIGSTOP
 * @property {() => void} resume SIGCONT
 * @property {() => Promise<void>} stop resumes and kills it, and removes the directory this module made
 */

export function redisServerAvailable() {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/**
 * Resolves once the Redis at `url` answers PING (credentials in the URL are used); rejects after `timeoutMs`.
 * @param {string} url
 * @param {number} [timeoutMs]
 */
export async function waitForRedis(url, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  /** @type {unknown} */
  let lastError;
  while (Date.now() < deadline) {
    const c = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return;
    } catch (err) {
      lastError = err;
      c.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`redis at ${url} did not answer PING within ${timeoutMs} ms: ${String(lastError)}`);
}

/** @param {string} url */
export async function flushRedis(url) {
  const c = new Redis(url);
  await c.flushdb();
  c.disconnect();
}

/**
 * Starts redis-server on a free port of 127.0.0.1 and resolves once it answers PING. Throws when
 * redis-server is not on PATH (callers say how to install it).
 * @param {{ dir?: string, log?: string, persistence?: 'aof' | 'none', args?: string[] }} [options] `dir`: its
 *   working directory (default a new temp directory, removed by stop()); `log`: a file for its output
 *   (default: discarded). A benchmark passes a file, never a pipe: nothing would drain it while load
 *   runs. `persistence`: 'aof' (default) or 'none'; `args`: more redis-server options, after these.
 * @returns {Promise<RedisServer>}
 */
export async function startRedisServer(options = {}) {
  const port = await freePort();
  const ownDir = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'keygate-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  /** @type {import('node:child_process').ChildProcess | undefined} */
  let proc;
  const start = async () => {
    const fd = options.log === undefined ? undefined : openSync(options.log, 'a');
    const aof = (options.persistence ?? 'aof') === 'aof' ? 'yes' : 'no';
    const argv = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', aof, '--dir', dir];
    argv.push(...(options.args ?? []));
    const child = spawn('redis-server', argv, { stdio: fd === undefined ? 'ignore' : ['ignore', fd, fd] });
    if (fd !== undefined) closeSync(fd);
    proc = child;
    const failed = new Promise((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`redis-server on port ${port} exited with ${code}`)));
    });
    failed.catch(() => {});
    await Promise.race([waitForRedis(url), failed]);
  };
  const kill = async () => {
    const p = proc;
    proc = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    port,
    url,
    pid: () => proc?.pid,
    kill,
    start,
    pause: () => void proc?.kill('SIGSTOP'),
    resume: () => void proc?.kill('SIGCONT'),
    stop: async () => {
      proc?.kill('SIGCONT');
      await kill();
      if (ownDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}
