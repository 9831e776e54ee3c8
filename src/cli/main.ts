import { checkConfigCommand } from './check-config-command.js';
import { keysCommand } from './keys-command.js';
import { packageVersion, serveCommand } from './serve-command.js';
import { tokenCommand } from './token-command.js';
import { managementTokenCommand } from './management-token-command.js';
import { demoCommand } from './demo-command.js';
import { demoUpstreamCommand } from './demo-upstream.js';

const USAGE = `Usage: keygate <command>

  serve                         run the proxy (reads KEYGATE_* environment variables)
  demo                          run a demo upstream and Keygate with the demo key (quickstart)
  demo-upstream [--host H] [--port P]   run only the demo upstream (compose, Kubernetes example)
  keys create|list|show|revoke|delete   manage API keys in Redis (KEYGATE_REDIS_URL)
  token --key K [--secret-stdin] [--recv-window N]   print a signed token (secret from KEYGATE_API_SECRET or stdin)
  management-token --name N --access read|write   print a new management API token and its tokens-file line
  check-config                  validate the environment, policy file and keys file; start nothing; exit 0 or 1
  --version                     print the version

Run "keygate <command> --help" for the options of one command.
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'serve':
      return serveCommand(rest);
    case 'demo':
      return demoCommand(rest);
    case 'demo-upstream':
      return demoUpstreamCommand(rest);
    case 'keys':
      return keysCommand(rest);
    case 'token':
      return tokenCommand(rest);
    case 'management-token':
      return managementTokenCommand(rest);
    case 'check-config':
      return checkConfigCommand(rest);
    case '--version':
    case 'version':
      // The container tests and operators ask an image which build it holds.
      process.stdout.write(`keygate ${packageVersion()}\n`);
      return 0;
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(USAGE);
      return command === undefined ? 1 : 0;
    default:
      process.stderr.write(`keygate: unknown command ${JSON.stringify(command)}\n\n${USAGE}`);
      return 1;
  }
}
