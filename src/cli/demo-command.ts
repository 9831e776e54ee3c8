import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createDemoUpstream } from './demo-upstream.js';
import { serveCommand } from './serve-command.js';

const DEMO_KEYS = fileURLToPath(new URL('../../examples/demo-keys.yaml', import.meta.url));

/**
 * Quickstart: a tiny upstream on 127.0.0.1 that echoes what it received, and
 * Keygate in front of it on the embedded store with the demo key.
 */
export async function demoCommand(argv: string[]): Promise<number> {
  const upstream = createDemoUpstream();
  const port = Number(process.env.KEYGATE_DEMO_UPSTREAM_PORT ?? 0);
  await new Promise<void>((resolve) => upstream.listen(port, '127.0.0.1', resolve));
  const address = upstream.address() as AddressInfo;
  const env = {
    ...process.env,
    KEYGATE_UPSTREAM: `http://127.0.0.1:${address.port}`,
    KEYGATE_KEYS_FILE: process.env.KEYGATE_KEYS_FILE || DEMO_KEYS,
  };
  process.stderr.write(`demo upstream on http://127.0.0.1:${address.port}; demo key "demo-key" from ${env.KEYGATE_KEYS_FILE}\n`);
  try {
    return await serveCommand(argv, env);
  } finally {
    upstream.close();
  }
}
