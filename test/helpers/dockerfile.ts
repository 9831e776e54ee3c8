/**
 * A small Dockerfile reader for structural tests: enough for the syntax our
 * Dockerfile uses (comments, parser directives, backslash continuations,
 * exec-form JSON arrays, ARG defaults). It refuses heredocs rather than
 * misread them.
 */
export interface Instruction {
  readonly keyword: string;
  /** Text after the keyword, continuations joined with a space. */
  readonly args: string;
  readonly line: number;
}

export interface Stage {
  readonly name: string | undefined;
  readonly from: string;
  readonly instructions: readonly Instruction[];
}

export function parseDockerfile(text: string): { args: Map<string, string>; stages: Stage[] } {
  const instructions: Instruction[] = [];
  const lines = text.split('\n');
  let i = 0;
  while (i < lines.length) {
    const start = i;
    let line = lines[i++]!;
    if (/^\s*(#.*)?$/.test(line)) continue;
    while (/\\\s*$/.test(line) && i < lines.length) {
      const next = lines[i++]!;
      if (/^\s*#/.test(next)) continue;
      line = `${line.replace(/\\\s*$/, '')} ${next.trim()}`;
    }
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`Dockerfile line ${start + 1}: cannot read ${JSON.stringify(line)}`);
    if (m[2]!.includes('<<'))
      throw new Error(`Dockerfile line ${start + 1}: heredocs are not supported by this reader`);
    instructions.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start + 1 });
  }
  const args = new Map<string, string>();
  const stages: Array<{ name: string | undefined; from: string; instructions: Instruction[] }> = [];
  for (const ins of instructions) {
    if (ins.keyword === 'ARG' && stages.length === 0) {
      const [k, v] = ins.args.split('=');
      args.set(k!, v ?? '');
      continue;
    }
    if (ins.keyword === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      if (!m) throw new Error(`Dockerfile line ${ins.line}: cannot read FROM ${ins.args}`);
      const from = m[1]!.replace(
        /\$\{(\w+)\}|\$(\w+)/g,
        (_, a: string | undefined, b: string | undefined) => args.get((a ?? b)!) ?? '',
      );
      stages.push({ name: m[2], from, instructions: [] });
      continue;
    }
    if (stages.length === 0) throw new Error(`Dockerfile line ${ins.line}: ${ins.keyword} before FROM`);
    stages[stages.length - 1]!.instructions.push(ins);
  }
  return { args, stages };
}

/** Exec form (JSON array) or shell form, as argv. */
export function execForm(args: string): string[] {
  const trimmed = args.trim();
  if (trimmed.startsWith('[')) return JSON.parse(trimmed) as string[];
  return ['/bin/sh', '-c', trimmed];
}

/** COPY/ADD: flags, sources and destination (shell form, no spaces in paths). */
export function copyArgs(args: string): { flags: Map<string, string>; sources: string[]; dest: string } {
  const words = args.trim().startsWith('[') ? (JSON.parse(args) as string[]) : args.split(/\s+/);
  const flags = new Map<string, string>();
  while (words[0]?.startsWith('--')) {
    const [k, v] = words.shift()!.slice(2).split('=');
    flags.set(k!, v ?? '');
  }
  const dest = words.pop()!;
  return { flags, sources: words, dest };
}

/**
 * .dockerignore semantics for the patterns we use: each line is a glob
 * (`*`, `?`; `**` for any depth) matched against the path or any of its
 * parent directories; `!` re-includes; the last matching line wins.
 */
export function dockerignored(patterns: string[], path: string): boolean {
  const toRe = (glob: string) =>
    new RegExp(
      `^${glob
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*\*/g, '\u0000')
        .replace(/\*/g, '[^/]*')
        .replace(/\?/g, '[^/]')
        // eslint-disable-next-line no-control-regex -- NUL held the place of "**" while "*" was translated
        .replace(/\u0000/g, '.*')}$`,
    );
  const parts = path.split('/');
  const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
  let ignored = false;
  for (const raw of patterns) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    const re = toRe((negate ? line.slice(1) : line).replace(/^\/+|\/+$/g, ''));
    if (prefixes.some((p) => re.test(p))) ignored = !negate;
  }
  return ignored;
}
