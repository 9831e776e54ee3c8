// Tested in test/process/secret-env.test.ts.
import { readFileSync } from 'node:fs';

type Env = Readonly<Record<string, string | undefined>>;

/**
 * A secret from the environment, or from the file its `_FILE` variable names
 * (the Docker and Kubernetes secrets convention: the value never appears in
 * the process environment or `docker inspect`). Setting both is a problem,
 * not a precedence rule: one of them would be silently ignored. Trailing line
 * breaks are dropped (`echo secret > file` adds one). Problems never quote
 * the file's content.
 */
export function readSecretEnv(
  env: Env,
  name: string,
  fileName: `${string}_FILE`,
  problems: string[],
): string | undefined {
  const direct = env[name] || undefined;
  const path = env[fileName] || undefined;
  if (path === undefined) return direct;
  if (direct !== undefined) {
    problems.push(`${name}, ${fileName}: set only one of them`);
    return direct;
  }
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    problems.push(`${fileName}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    return undefined;
  }
  const value = text.replace(/[\r\n]+$/, '');
  if (value === '') {
    problems.push(`${fileName}: ${path} is empty`);
    return undefined;
  }
  return value;
}
