/** The process environment as the config readers see it (tests pass plain objects). */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * An integer setting: unset or empty is the default; anything else must be
 * digits within [min, max], else the problem is recorded and the default kept,
 * so that loading goes on and reports every problem together.
 */
export function readEnvInt(env: Env, name: string, def: number, min: number, max: number, problems: string[]): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    problems.push(`${name}: must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
    return def;
  }
  return Number(raw);
}
