// Tested in test/process/port-in-use.test.ts.
import type { Config } from '../../config/load-config.js';

interface ListenFailure {
  code?: string;
  port?: number;
  address?: string;
  message?: string;
}

/**
 * An operator reading "listen EADDRINUSE" must still work out which of up to three ports it was:
 * this names the setting behind the port and what to do, in Keygate's words.
 */
export function describeListenError(
  err: unknown,
  config: Pick<Config, 'port' | 'adminPort' | 'management'> & Partial<Pick<Config, 'scanning'>>,
): string {
  const e = (err ?? {}) as ListenFailure;
  const at = e.address !== undefined && e.port !== undefined ? `${e.address}:${e.port}` : 'its address';
  const setting =
    e.port === undefined
      ? undefined
      : e.port === config.port
        ? 'KEYGATE_PORT'
        : e.port === config.adminPort
          ? 'KEYGATE_ADMIN_PORT'
          : e.port === config.management?.port
            ? 'KEYGATE_MANAGEMENT_PORT'
            : e.port === config.scanning?.port
              ? 'KEYGATE_SCANNING_PORT'
              : undefined;
  const which = setting ? `${setting} (${at})` : at;
  switch (e.code) {
    case 'EADDRINUSE':
      return `cannot listen on ${which}: the port is already in use by another process; stop it or choose another port`;
    case 'EACCES':
      return `cannot listen on ${which}: permission denied (ports below 1024 need privileges); choose a port above 1023`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${which}: no network interface has that address; check the matching *_HOST setting`;
    default:
      return `cannot listen on ${which}: ${e.message ?? String(err)}`;
  }
}
