import { parseArgs } from 'node:util';
import { loadKeysFile } from '../store/keys-file.js';
import { describeConfig, loadStartupConfig } from './serve-command.js';

const HELP = `Usage: keygate check-config

Validates what "keygate serve" would read, without starting anything (no port
is bound, Redis is not contacted): the KEYGATE_* environment (and the files
its _FILE variables name), the policy file (KEYGATE_CONFIG) and, in embedded
mode, the keys file (KEYGATE_KEYS_FILE), each against its JSON Schema
(config/schema/) and Keygate's own checks.

Exit status: 0 when everything is valid, 1 with every problem listed on
standard error.
`;

export async function checkConfigCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { help: { type: 'boolean', short: 'h' } }, strict: true });
  if (values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const { config, problems } = loadStartupConfig(env);
  if (!config) {
    process.stderr.write(`keygate check-config: ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n  - ${problems.join('\n  - ')}\n`);
    return 1;
  }
  const keys = config.keysFile && !config.redis ? loadKeysFile(config.keysFile).length : undefined;
  // The same effective configuration the startup log shows, secrets masked.
  process.stdout.write(`keygate check-config: configuration is valid\n${JSON.stringify({ ...describeConfig(config), ...(keys !== undefined && { keys }) }, null, 2)}\n`);
  return 0;
}
