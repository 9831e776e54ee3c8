// Tested in test/process/cli.test.ts, test/process/misspelt-settings.test.ts, test/process/parse-errors-hide-secrets.test.ts.
import { availableParallelism } from 'node:os';
import { unknownEnvProblems } from '../../config/env-names.js';
import { workersWarning } from '../../config/read-workers.js';
import type { Command } from '../command-line.js';
import { describeConfig, loadStartupConfig } from './startup-config.js';

export const checkConfigCommand: Command = {
  spec: {
    name: 'check-config',
    summary: 'validate the environment, the policy file and the keys file; start nothing',
    options: [],
    details: `Validates what "keygate serve" would read, without starting anything (no port
is bound, Redis is not contacted): the KEYGATE_* environment (and the files
its _FILE variables name), the policy file (KEYGATE_CONFIG) and, in embedded
mode, the keys file (KEYGATE_KEYS_FILE), each against its JSON Schema
(config/schema/) and Keygate's own checks. A KEYGATE_* variable Keygate does not
read is an error, naming the nearest known one ("keygate serve" only warns).
Exit status: 0 when everything is valid (the effective configuration is printed,
secrets masked; a warning, such as KEYGATE_WORKERS above what this host's cores
can use, goes to standard error), 1 with every problem listed on standard error.
Its "metering" shows the policy's defaultRateLimit, defaultOwnerRateLimit and
failedAuthLimit as written ("none" / "off" when unset) and routeCosts: every
route whose cost is not 1.`,
  },
  run(_parsed, io) {
    const { config, keys: records, problems: configProblems } = loadStartupConfig(io.env);
    // A misspelt variable is an error here: its default is silently in force, which is what check-config is for.
    const problems = [...configProblems, ...unknownEnvProblems(io.env)];
    if (!config || problems.length > 0) {
      io.err.write(
        `keygate check-config: ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n  - ${problems.join('\n  - ')}\n`,
      );
      return 1;
    }
    const keys = records?.length;
    // Valid but measured not to pay on this host: said, not refused (exit status stays 0).
    const warning = workersWarning(config.workers, availableParallelism());
    if (warning) io.err.write(`keygate check-config: warning: ${warning}\n`);
    // The same effective configuration the startup log shows, secrets masked.
    io.out.write(
      `keygate check-config: configuration is valid\n${JSON.stringify({ ...describeConfig(config), ...(keys !== undefined && { keys }) }, null, 2)}\n`,
    );
    return 0;
  },
};
