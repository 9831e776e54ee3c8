/** How many keys a grouped problem names before "and N more". */
const NAMED = 3;

const count = (n: number) => n.toLocaleString('en-US');

/**
 * A keys file's problems as a person reads them: the same problem in many keys is one line saying in
 * how many (`apiSecret missing in 1,000 of 1,000 keys`), every kind of problem still listed, in the
 * order first met. A problem of one key only, or of the file itself, is kept as it was worded.
 * `total` is the number of entries in the file's `keys` list; `exportWithoutSecrets` is true when the
 * file says it was written by `keygate keys export` without --with-secrets.
 */
export function groupKeyProblems(
  problems: readonly string[],
  file: string,
  options: { total?: number; exportWithoutSecrets?: boolean } = {},
): string[] {
  const at = new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: keys\\[(\\d+)\\](.*)$`, 's');
  const groups = new Map<string, { first: string; keys: number[] }>();
  const order: string[] = [];
  for (const problem of problems) {
    const m = at.exec(problem);
    const kind = m ? m[2]! : `\0${problem}`;
    let group = groups.get(kind);
    if (!group) {
      group = { first: problem, keys: [] };
      groups.set(kind, group);
      order.push(kind);
    }
    if (m) group.keys.push(Number(m[1]));
  }
  const of = options.total !== undefined ? ` of ${count(options.total)}` : '';
  return order.map((kind) => {
    const { first, keys } = groups.get(kind)!;
    if (keys.length < 2) return first;
    const named = keys.slice(0, NAMED).map((i) => `keys[${i}]`);
    const which = `(${named.join(', ')}${keys.length > NAMED ? ` and ${count(keys.length - NAMED)} more` : ''})`;
    if (kind === '.apiSecret: required') {
      const all = options.total !== undefined && keys.length === options.total;
      const hint =
        options.exportWithoutSecrets || all
          ? ': this looks like an export without --with-secrets (keygate keys export --with-secrets writes a file that imports)'
          : ` ${which}`;
      return `${file}: apiSecret missing in ${count(keys.length)}${of} keys${hint}`;
    }
    return `${file}: keys[*]${kind}, in ${count(keys.length)}${of} keys ${which}`;
  });
}
