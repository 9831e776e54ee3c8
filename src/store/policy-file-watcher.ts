import type { Logger } from 'pino';
import { ConfigError, loadPolicy, type Policy } from '../config/load-config.js';
import { createFileReloader } from './file-watcher.js';

/**
 * The policy in force, read per request. The policy file (KEYGATE_CONFIG)
 * reloads like the keys file: on change, save by rename, symlink or
 * Kubernetes `..data` swap (file-watcher.ts), and on SIGHUP. A broken file is
 * logged and the last good policy stays in force. Parsing stays in loadPolicy.
 */
export interface PolicySource {
  /** The current policy; callers read it once per request so one request sees one policy. */
  policy(): Policy;
  reload(cause: string): boolean;
  close(): void;
}

export function createPolicySource(options: { file: string; initial: Policy; debounceMs?: number }, deps: { logger: Logger }): PolicySource {
  let current = options.initial;
  const reloader = createFileReloader(
    { file: options.file, what: 'policy file', kept: 'policy', ...(options.debounceMs !== undefined && { debounceMs: options.debounceMs }) },
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
      },
      describe: (p) => ({ routes: p.routes.rules.length, publicRoutes: p.publicRoutes.rules.length, unlistedRoutes: p.unlistedRoutes }),
    },
  );
  return { policy: () => current, reload: (cause) => reloader.reload(cause), close: () => reloader.close() };
}
