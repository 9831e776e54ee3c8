import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';

/** The quickstart's upstream: answers every request with what it received, as JSON. */
export function createDemoUpstream(): Server {
  return createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ upstream: 'demo', method: req.method, path: req.url, apiKeyId: req.headers['x-api-key-id'] ?? null, accounts: [{ id: 'acc_1', name: 'Demo account' }] }));
  });
}

const HELP = `Usage: keygate demo-upstream [--host 127.0.0.1] [--port 3000]

Runs only the demo upstream (for docker-compose and the Kubernetes example).
Bind it to 127.0.0.1 when Keygate runs beside it, so only Keygate can reach it.
`;

export async function demoUpstreamCommand(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '3000' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port) || port > 65535) {
    process.stderr.write(`keygate demo-upstream: --port must be 0-65535\n${HELP}`);
    return 2;
  }
  const server = createDemoUpstream();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, values.host, resolve);
  });
  process.stderr.write(`demo upstream listening on http://${values.host}:${(server.address() as AddressInfo).port}\n`);
  await new Promise<void>((resolve) => {
    const stop = () => {
      server.closeAllConnections();
      server.close(() => resolve());
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  return 0;
}
