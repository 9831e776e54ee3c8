// Tested in test/unit/load-config.test.ts, test/e2e/forwarding.test.ts, test/adversarial/upstream-faults.test.ts.
import type { Env } from './read-env-int.js';

/** Where requests go: KEYGATE_MODE, and the upstream (proxy mode) or the path prefix Envoy adds (forward-auth). */
export interface UpstreamSettings {
  readonly mode: 'proxy' | 'forward-auth';
  readonly upstream: URL | undefined;
  readonly forwardAuthPathPrefix: string | undefined;
}

export function readUpstream(env: Env, problems: string[]): UpstreamSettings {
  const rawMode = env.KEYGATE_MODE || 'proxy';
  if (rawMode !== 'proxy' && rawMode !== 'forward-auth')
    problems.push(`KEYGATE_MODE: "proxy" or "forward-auth", got ${JSON.stringify(rawMode)}`);
  const mode = rawMode === 'forward-auth' ? 'forward-auth' : 'proxy';
  const upstream = mode === 'proxy' ? readUpstreamUrl(env.KEYGATE_UPSTREAM, problems) : undefined;
  const forwardAuthPathPrefix = env.KEYGATE_FORWARD_AUTH_PATH_PREFIX || undefined;
  if (forwardAuthPathPrefix !== undefined) {
    if (mode !== 'forward-auth')
      problems.push('KEYGATE_FORWARD_AUTH_PATH_PREFIX: only used with KEYGATE_MODE=forward-auth');
    // A plain path without a trailing slash: Envoy puts it right before the original path, which starts with "/".
    else if (!/^(\/[A-Za-z0-9\-._~]+)+$/.test(forwardAuthPathPrefix) || /\/\.\.?(\/|$)/.test(forwardAuthPathPrefix))
      problems.push(
        `KEYGATE_FORWARD_AUTH_PATH_PREFIX: a path such as /keygate-check (segments of letters, digits, "-._~", no "." or ".." segment, no trailing "/"), got ${JSON.stringify(forwardAuthPathPrefix)}`,
      );
  }
  return { mode, upstream, forwardAuthPathPrefix };
}

/** Proxy mode's KEYGATE_UPSTREAM: an origin only, so the path Keygate checks is the path the upstream gets. */
function readUpstreamUrl(raw: string | undefined, problems: string[]): URL | undefined {
  if (!raw) {
    problems.push('KEYGATE_UPSTREAM: required (e.g. http://127.0.0.1:3000); not needed with KEYGATE_MODE=forward-auth');
    return undefined;
  }
  try {
    const upstream = new URL(raw);
    if (upstream.protocol !== 'http:' && upstream.protocol !== 'https:')
      problems.push('KEYGATE_UPSTREAM: must be http:// or https://');
    if (upstream.pathname !== '/' || upstream.search || upstream.hash || upstream.username || upstream.password) {
      problems.push(
        'KEYGATE_UPSTREAM: must be an origin only (scheme, host, port), so the path we check is the path the upstream gets',
      );
    }
    return upstream;
  } catch {
    problems.push(`KEYGATE_UPSTREAM: not a URL: ${JSON.stringify(raw)}`);
    return undefined;
  }
}
