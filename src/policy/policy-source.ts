// Tested in test/e2e/policy-source.test.ts.
import type { Logger } from 'pino';
import type { Policy } from '../policy/policy.js';
import { loadPolicy } from '../policy/load-policy.js';
import { ConfigError } from '../files/config-error.js';
import { showRule } from './routes.js';
import { createFileReloader } from '../files/file-reloader.js';

/**
 * The policy in force, read per request. The policy file (KEYGATE_CONFIG)
 * reloads like the keys file: on change, save by rename, symlink or
 * Kubernetes `..data` swap (files/file-reloader.ts), and on SIGHUP. A broken file is
 * logged and the last good policy stays in force. Parsing stays in loadPolicy.
 */
export interface PolicySource {
  /** The current policy; callers read it once per request so one request sees one policy. */
  policy(): Policy;
  reload(cause: string): boolean;
  close(): void;
}

export function createPolicySource(
  options: { file: string; initial: Policy; debounceMs?: number },
  deps: { logger: Logger },
): PolicySource {
  let current = options.initial;
  warnPublicApiRoutes(current, deps.logger);
  const reloader = createFileReloader(
    {
      file: options.file,
      what: 'policy file',
      kept: 'policy',
      ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }),
    },
    {
      logger: deps.logger,
      load: (file) => {
        const problems: string[] = [];
        const policy = loadPolicy(file, problems);
        if (problems.length > 0) throw new ConfigError(problems);
        return Object.freeze(policy);
      },
      apply: (policy) => {
        current = policy;
        warnPublicApiRoutes(policy, deps.logger);
      },
      describe: (p) => ({
        routes: p.routes.rules.length,
        publicRoutes: p.publicRoutes.rules.length + p.publicApiRoutes.rules.length,
        unlistedRoutes: p.unlistedRoutes,
      }),
    },
  );
  return { policy: () => current, reload: (cause) => reloader.reload(cause), close: () => reloader.close() };
}

/** Every /api/v3/ route anyone may call without a key: said loudly, on start and on every reload that keeps some. */
function warnPublicApiRoutes(policy: Policy, logger: Logger): void {
  const rules = policy.publicApiRoutes.rules;
  if (rules.length === 0) return;
  const routes = rules.map(showRule);
  logger.warn(
    { publicApiRoutes: routes },
    `${routes.length} /api/v3/ route(s) are public: forwarded without authentication and without identity`,
  );
}
