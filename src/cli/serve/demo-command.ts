// Tested in test/process/cli.test.ts, test/process/assertion-cli.test.ts.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createAssertionVerifier, type AssertionVerifier } from '../../client/verify-assertion.js';
import { newAssertionKey } from '../../assertion/assertion-keys.js';
import { flag, type Command } from '../command-line.js';
import { createDemoUpstream } from './demo-upstream.js';
import { watchParent } from './parent-watch.js';
import { serve } from './serve-command.js';

const DEMO_KEYS = fileURLToPath(new URL('../../../examples/demo-keys.yaml', import.meta.url));

/**
 * Quickstart: a tiny upstream on 127.0.0.1 that echoes what it received, and
 * Keygate in front of it on the embedded store with the demo key.
 */
export const demoCommand: Command = {
  spec: {
    name: 'demo',
    summary: 'run a demo upstream and Keygate in front of it with the demo key (the quickstart)',
    options: [
      {
        name: 'assertion',
        type: 'boolean',
        help: 'turn the signed identity assertion on: the demo upstream then believes only X-Keygate-Assertion',
      },
    ],
    details: `The upstream listens on 127.0.0.1 (port KEYGATE_DEMO_UPSTREAM_PORT, default any free
port); Keygate reads the other KEYGATE_* variables as "keygate serve" does, with
KEYGATE_UPSTREAM set to the demo upstream, KEYGATE_KEYS_FILE defaulting to
examples/demo-keys.yaml (key "demo-key", secret "demo-secret-0123456789abcdef") and
KEYGATE_HOST defaulting to 127.0.0.1 (the demo secret is public: set KEYGATE_HOST=0.0.0.0
to reach the demo from other machines). The demo stops when the process that started
it ends (under "npm run demo", npm).
With --assertion, a new Ed25519 key in a temporary 0600 file signs X-Keygate-Assertion
(audience "keygate-demo"), and the demo upstream verifies it on every request: a
direct request with a forged X-Api-Key-Id gets 401. The file is removed on exit.`,
  },
  async run(parsed, io) {
    let assertionEnv: Record<string, string> = {};
    let verify: AssertionVerifier | undefined;
    let keysDir: string | undefined;
    if (flag(parsed, 'assertion')) {
      keysDir = mkdtempSync(join(tmpdir(), 'keygate-demo-assertion-'));
      const key = newAssertionKey('EdDSA');
      const file = join(keysDir, 'assertion-keys.json');
      writeFileSync(file, JSON.stringify({ keys: [key] }), { mode: 0o600 });
      const { d: _private, ...publicPart } = key;
      verify = createAssertionVerifier({ jwks: { keys: [publicPart] }, audience: 'keygate-demo' });
      assertionEnv = { KEYGATE_ASSERTION_KEYS_FILE: file, KEYGATE_ASSERTION_AUDIENCE: 'keygate-demo' };
    }
    const upstream = createDemoUpstream(verify && { verify });
    const port = Number(io.env.KEYGATE_DEMO_UPSTREAM_PORT ?? 0);
    await new Promise<void>((resolve, reject) => {
      upstream.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          new Error(
            err.code === 'EADDRINUSE'
              ? `cannot listen on KEYGATE_DEMO_UPSTREAM_PORT (127.0.0.1:${port}): the port is already in use by another process; stop it or choose another port`
              : `demo upstream cannot listen on 127.0.0.1:${port}: ${err.message}`,
          ),
        ),
      );
      upstream.listen(port, '127.0.0.1', resolve);
    });
    const address = upstream.address() as AddressInfo;
    const env = {
      ...io.env,
      // The demo key's secret is published: the proxy port is this machine's alone unless asked for more.
      KEYGATE_HOST: io.env.KEYGATE_HOST || '127.0.0.1',
      KEYGATE_UPSTREAM: `http://127.0.0.1:${address.port}`,
      KEYGATE_KEYS_FILE: io.env.KEYGATE_KEYS_FILE || DEMO_KEYS,
      ...assertionEnv,
    };
    io.err.write(
      `demo upstream on http://127.0.0.1:${address.port}; demo key "demo-key" from ${env.KEYGATE_KEYS_FILE}\n`,
    );
    // A foreground toy: it ends with what started it (npm killed, a terminal closed), never left behind serving.
    const stopWatching = watchParent(io.env, (pid) => {
      io.err.write(`keygate demo: the process that started it (pid ${pid}) ended; stopping\n`);
      process.kill(process.pid, 'SIGTERM');
    });
    try {
      return await serve(env);
    } finally {
      stopWatching();
      upstream.close();
      if (keysDir !== undefined) rmSync(keysDir, { recursive: true, force: true });
    }
  },
};
