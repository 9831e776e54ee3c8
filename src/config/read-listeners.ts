// Tested in test/unit/load-config.test.ts (ports, defaults and conflicts), test/process/port-in-use.test.ts.
import { readEnvInt, type Env } from './read-env-int.js';

/** The proxy port and the admin port (/metrics, /healthz, /readyz), each with its address. */
export interface Listeners {
  readonly host: string;
  readonly port: number;
  readonly adminHost: string;
  readonly adminPort: number;
}

export function readListeners(env: Env, problems: string[]): Listeners {
  const port = readEnvInt(env, 'KEYGATE_PORT', 8000, 0, 65535, problems);
  const adminPort = readEnvInt(env, 'KEYGATE_ADMIN_PORT', 9090, 0, 65535, problems);
  if (port === adminPort && port !== 0)
    problems.push('KEYGATE_ADMIN_PORT: must differ from KEYGATE_PORT (admin endpoints never share the proxy port)');
  return {
    host: env.KEYGATE_HOST || '0.0.0.0',
    port,
    // Loopback unless asked: /metrics and /readyz describe the deployment and need no audience beyond the host.
    adminHost: env.KEYGATE_ADMIN_HOST || '127.0.0.1',
    adminPort,
  };
}
