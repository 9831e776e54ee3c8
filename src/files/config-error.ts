// Tested in test/unit/load-config.test.ts, test/unit/redis-settings.test.ts, test/process/secret-env.test.ts.
/** Settings or a file with problems: every one is listed, so an operator fixes them in one pass. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}
