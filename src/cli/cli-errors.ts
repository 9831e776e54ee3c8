// Tested in test/unit/command-line.test.ts (usage errors, exit 2), test/unit/keys-actions.test.ts.
/**
 * Errors a command throws instead of printing and returning a number: they
 * are turned into a message on stderr and an exit status in one place
 * (exitCodeFor), so every command follows the same convention:
 * 0 done, 1 the operation failed (no such key, a conflict), 2 usage.
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** A wrong command line: exit 2, with a pointer to the command's help. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
  }
}

/** The key named on the command line does not exist: exit 1. */
export class KeyNotFound extends CliError {
  constructor(readonly apiKey: string) {
    super(`no key ${JSON.stringify(apiKey)}`, 1);
  }
}

/** Writes a CliError as "<command>: <message>" to `err` and returns its exit status; anything else is a bug and is rethrown. */
export function exitCodeFor(error: unknown, err: NodeJS.WritableStream, command: string): number {
  if (!(error instanceof CliError)) throw error;
  const hint = error instanceof UsageError ? `\nSee "${command} --help".` : '';
  err.write(`${command}: ${error.message}${hint}\n`);
  return error.exitCode;
}
