// Tested in test/process/cli.test.ts (keygate demo), test/process/assertion-cli.test.ts.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ASSERTION_HEADER, AssertionError, type AssertionVerifier } from '../../client/verify-assertion.js';
import { UsageError } from '../cli-errors.js';
import { str, type Command } from '../command-line.js';

/**
 * The quickstart's upstream: answers every request with what it received, as JSON. With `verify`
 * (`keygate demo --assertion`) it believes no identity header: a request without a valid
 * X-Keygate-Assertion (a direct one with a forged X-Api-Key-Id) is refused with 401 and the reason.
 */
export function createDemoUpstream(options: { verify?: AssertionVerifier } = {}): Server {
  return createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    const answer = (assertedKeyId?: string) =>
      res.end(
        JSON.stringify({
          upstream: 'demo',
          method: req.method,
          path: req.url,
          apiKeyId: req.headers['x-api-key-id'] ?? null,
          ...(assertedKeyId !== undefined && { assertedKeyId }),
          accounts: [{ id: 'acc_1', name: 'Demo account' }],
        }),
      );
    const { verify } = options;
    if (verify === undefined) return answer();
    verify(req.headers[ASSERTION_HEADER], { method: req.method ?? '', target: req.url ?? '' }).then(
      (identity) => answer(identity.keyId),
      (err: unknown) => {
        res.statusCode = 401;
        const reason = err instanceof AssertionError ? err.code : 'malformed';
        res.end(JSON.stringify({ upstream: 'demo', refused: 'X-Keygate-Assertion', reason }));
      },
    );
  });
}

export const demoUpstreamCommand: Command = {
  spec: {
    name: 'demo-upstream',
    summary: 'run only the demo upstream (for docker-compose and the Kubernetes example)',
    options: [
      { name: 'host', type: 'string', value: 'address', help: 'address to listen on (default 127.0.0.1)' },
      { name: 'port', type: 'string', value: 'port', help: 'port to listen on, 0-65535 (default 3000)' },
    ],
    details: 'Bind it to 127.0.0.1 when Keygate runs beside it, so only Keygate can reach it.',
  },
  async run(parsed, io) {
    const host = str(parsed, 'host') ?? '127.0.0.1';
    const portText = str(parsed, 'port') ?? '3000';
    const port = Number(portText);
    if (!/^\d+$/.test(portText) || port > 65535) throw new UsageError('--port must be 0-65535');
    const server = createDemoUpstream();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, resolve);
    });
    io.err.write(`demo upstream listening on http://${host}:${(server.address() as AddressInfo).port}\n`);
    await new Promise<void>((resolve) => {
      const stop = () => {
        server.closeAllConnections();
        server.close(() => resolve());
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
    });
    return 0;
  },
};
