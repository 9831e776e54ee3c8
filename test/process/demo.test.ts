import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness/free-port.mjs';
import { guard } from '../helpers/slowdown.js';
import { serveKeygate } from '../helpers/spawn-keygate.js';

/**
 * `npm run demo` as a newcomer runs it. The demo key's secret is in the README, so the demo listens on
 * 127.0.0.1 unless KEYGATE_HOST says otherwise; and it is a foreground toy, so it ends when what started it ends,
 * npm included, however npm was stopped.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The local addresses `port` is listened on (TCP, IPv4 and IPv6), from /proc/net. */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const out: string[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state !== '0A' || !local?.endsWith(`:${hexPort}`)) continue; // 0A: LISTEN
      const hex = local.slice(0, local.indexOf(':'));
      out.push(
        hex.length === 8
          ? (hex.match(/../g) ?? [])
              .reverse()
              .map((b) => parseInt(b, 16))
              .join('.')
          : hex === '0'.repeat(32)
            ? '::'
            : hex,
      );
    }
  }
  return out;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    const state = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]?.[0];
    return state !== 'Z';
  } catch {
    return false;
  }
};

describe('keygate demo listens on loopback unless told otherwise', () => {
  it.each([
    [undefined, ['127.0.0.1']],
    ['0.0.0.0', ['0.0.0.0']],
  ])('KEYGATE_HOST=%s: the proxy port listens on %j', async (host, addresses) => {
    const child = await serveKeygate({ KEYGATE_HOST: host }, { args: ['demo'] });
    try {
      expect(listeningAddresses(child.port)).toEqual(addresses);
    } finally {
      await child.stop();
    }
  });
});

// SIGTERM: npm passes it on to its script. SIGKILL: npm cannot, and the shell it ran the script in stays.
describe('npm run demo ends when npm ends', () => {
  it.each(['SIGKILL', 'SIGTERM'] as const)('npm stopped with %s: keygate demo exits too', async (signal) => {
    const [port, adminPort] = [await freePort(), await freePort()];
    const npm = spawn('npm', ['run', 'demo'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, KEYGATE_PORT: String(port), KEYGATE_ADMIN_PORT: String(adminPort) },
    });
    let output = '';
    npm.stdout.on('data', (c) => (output += String(c)));
    npm.stderr.on('data', (c) => (output += String(c)));
    const npmExited = new Promise((r) => npm.once('exit', r));
    let demoPid: number | undefined;
    try {
      const deadline = Date.now() + guard(60_000);
      while (demoPid === undefined) {
        const started = /^\{.*"pid":(\d+).*"msg":"keygate started"\}$/m.exec(output);
        if (started) demoPid = Number(started[1]);
        else if (npm.exitCode !== null) throw new Error(`npm run demo exited:\n${output}`);
        else if (Date.now() > deadline) throw new Error(`npm run demo did not start:\n${output}`);
        else await new Promise((r) => setTimeout(r, 50));
      }
      npm.kill(signal);
      await npmExited;
      const gone = Date.now() + guard(10_000);
      while (alive(demoPid) && Date.now() < gone) await new Promise((r) => setTimeout(r, 50));
      expect(alive(demoPid), output).toBe(false);
    } finally {
      if (demoPid !== undefined && alive(demoPid)) process.kill(demoPid, 'SIGKILL');
      if (npm.exitCode === null && npm.signalCode === null) npm.kill('SIGKILL');
    }
  });
});
