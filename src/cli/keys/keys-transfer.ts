import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { toExternal, type KeyRecord } from '../../keys/key-record.js';
import { KeysFileError, loadKeysFileWithOwners } from '../../keys/keys-file.js';
import type { OwnerRecord } from '../../keys/owner-record.js';
import { groupKeyProblems } from '../../keys/key-problems.js';
import { readDataFile } from '../../files/read-data-file.js';
import { CliError } from '../cli-errors.js';
import { flag, str } from '../command-line.js';
import { auditEntry } from '../../store/audit-entry.js';
import { JSON_OPTION, warnPlainSecrets, type KeyAction } from './key-context.js';

/**
 * Export in the keys-file format, so a file exported with --with-secrets can
 * be imported elsewhere or used as KEYGATE_KEYS_FILE. Without --with-secrets
 * no secret (current or previous) leaves Redis. An export is the whole store: the owners' own limits
 * go with the keys, as the keys file's top-level `owners:`, and an import sets them.
 */
export const exportAction: KeyAction = {
  spec: {
    name: 'export',
    summary: 'write every key in the keys-file format (YAML, or JSON)',
    options: [
      {
        name: 'with-secrets',
        type: 'boolean',
        help: 'include the secrets, so the file can be imported or used as KEYGATE_KEYS_FILE',
      },
      {
        name: 'out',
        type: 'string',
        value: 'file',
        help: 'write a new 0600 file instead of stdout (JSON when it ends in .json)',
      },
      { name: 'json', type: 'boolean', help: 'JSON instead of YAML' },
    ],
  },
  async run(ctx, p) {
    const withSecrets = flag(p, 'with-secrets');
    const out = str(p, 'out');
    const keys: Array<Record<string, unknown>> = [];
    const progress = ctx.progress('exporting', await ctx.store.countKeys());
    try {
      for await (const page of ctx.ops.listAll({})) {
        for (const r of page) {
          const o = toExternal(r);
          if (!withSecrets) {
            delete o.apiSecret;
            delete o.previousSecrets;
          }
          keys.push(o);
        }
        progress.advance(page.length);
      }
    } finally {
      progress.done();
    }
    // Owners' own limits hold no secret: exported either way (absent when there are none, as before).
    const owners = await ctx.owners.list();
    const doc = {
      keys,
      ...(owners.length > 0 && {
        owners: Object.fromEntries(
          owners.map((o) => [o.owner, { rateLimit: o.rateLimit, ...(o.credits && { credits: o.credits }) }]),
        ),
      }),
    };
    // Imported here, not at the top: `keygate keys keygen` and every --help load this module too.
    const { stringify: toYaml } = await import('yaml');
    // lineWidth 0: a long label stays on one line, the plain form a keys file loads fast in (files/flat-yaml.ts).
    const text =
      flag(p, 'json') || out?.endsWith('.json')
        ? `${JSON.stringify(doc, null, 2)}\n`
        : `# keygate keys export${withSecrets ? ' (WITH SECRETS: protect this file)' : ' (no secrets: not importable)'}\n${toYaml(doc, { lineWidth: 0 })}`;
    if (out) writePrivateFile(out, text);
    else ctx.out.write(text);
    // The summary on stderr: stdout may be the export itself.
    ctx.err.write(
      `exported ${keys.length} keys${out ? ` to ${out}` : ''}${withSecrets ? ' with secrets' : ' without secrets (not importable)'}\n`,
    );
    // One entry for the whole export (apiKey "*"), on the audit log: an export changes no key.
    ctx.audit(
      auditEntry(
        ctx.now(),
        ctx.actor,
        withSecrets ? 'export-with-secrets' : 'export',
        { apiKey: '*', id: '*' },
        { detail: `${keys.length} keys${owners.length > 0 ? `, ${owners.length} owners` : ''}` },
      ),
    );
  },
};

/**
 * Writes `text` to `path` as a new 0600 file, whatever was there before. A
 * plain write keeps an existing file's mode (e.g. 0644) and follows a
 * symlink, so secrets could land world-readable or in a file someone else
 * planted the link to. Instead: a fresh file, created exclusively with mode
 * 0600 beside the target, then renamed over it. rename replaces a symlink
 * itself, never its target, and readers never see half a file.
 */
export function writePrivateFile(path: string, text: string): void {
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    writeFileSync(tmp, text, { mode: 0o600, flag: 'wx' });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Import a keys file: the whole file is validated before anything is written, then it is written in
 * batches (key-operations.ts importKeys). A file of at most one batch is all or nothing; a larger one
 * that stops part-way prints what was applied and exits 1 (a re-run is safe).
 */
export const importAction: KeyAction = {
  spec: {
    name: 'import',
    summary: 'add the keys of a keys file (the whole file is checked first, then written in atomic batches)',
    args: ['<file>'],
    options: [
      { name: 'replace', type: 'boolean', help: 'overwrite keys that already exist (default: keep them)' },
      JSON_OPTION,
    ],
  },
  async run(ctx, p) {
    let records: KeyRecord[];
    let owners: OwnerRecord[];
    try {
      ({ records, owners } = loadKeysFileWithOwners(p.args[0] as string));
    } catch (err) {
      if (!(err instanceof KeysFileError)) throw err;
      throw new CliError(`nothing imported:${importProblems(p.args[0] as string, err.problems)}`, 2);
    }
    const replace = flag(p, 'replace');
    warnPlainSecrets(ctx, records.filter((r) => r.secret !== undefined).length);
    const progress = ctx.progress('importing', records.length);
    let result;
    try {
      result = await ctx.ops.importKeys(records, replace, ctx.actor, (n) => progress.advance(n));
    } finally {
      progress.done();
    }
    const report = ctx.must(result);
    const { total, created, replaced, skipped, stopped } = report;
    // The file's owners' limits, once its keys are in: an owner with a limit already is kept
    // unless --replace, as keys are. Each is one audited change (owner-operations.ts).
    let ownersSet = 0;
    if (stopped === undefined)
      for (const o of owners) {
        if (!replace && (await ctx.store.readOwner(o.owner)) !== null) continue;
        // Credits are set again from the file's balance (a new set: setAt is Keygate's own).
        const credits = o.credits && {
          remaining: o.credits.remaining,
          ...(o.credits.refill && { refill: o.credits.refill }),
        };
        ctx.must(
          await ctx.owners.set(o.owner, { rateLimit: o.rateLimit ?? null, ...(credits && { credits }) }, ctx.actor),
        );
        ownersSet++;
      }
    if (flag(p, 'json'))
      ctx.print({ ...report, complete: stopped === undefined, ...(owners.length > 0 && { ownersSet }) });
    else if (stopped === undefined)
      ctx.out.write(
        `imported ${created} new, replaced ${replaced}, skipped ${skipped} existing (use --replace to overwrite)${owners.length > 0 ? `; set ${ownersSet} of ${owners.length} owners' limits` : ''}\n`,
      );
    if (stopped === undefined) return;
    if (!flag(p, 'json'))
      ctx.out.write(
        `imported ${created} new, replaced ${replaced}, skipped ${skipped} existing of ${total}, then stopped\n`,
      );
    throw new CliError(
      `import stopped after ${created + replaced + skipped} of ${total} keys: ${stopped}\n` +
        `Re-running the same import is safe: ${replace ? 'with --replace it writes every key of the file again' : 'it skips the keys already imported'}.`,
      1,
    );
  },
};

/**
 * A keys file's problems, grouped (keys/key-problems.ts): one line when there is one kind, so an
 * export made without --with-secrets is said in one line however many keys it holds; every kind at once.
 */
function importProblems(file: string, problems: readonly string[]): string {
  let total: number | undefined;
  let exportWithoutSecrets = false;
  try {
    const list = (readDataFile(file) as { keys?: unknown } | null)?.keys;
    if (Array.isArray(list)) total = list.length;
    exportWithoutSecrets = readFileSync(file, 'utf8').startsWith('# keygate keys export (no secrets');
  } catch {
    // Unreadable or not YAML/JSON: the problems already say so.
  }
  const grouped = groupKeyProblems(problems, file, { ...(total !== undefined && { total }), exportWithoutSecrets });
  return grouped.length === 1 ? ` ${grouped[0]!}` : `\n  - ${grouped.join('\n  - ')}`;
}

/** Re-writes every key so its secrets are sealed with the current encryption key. */
export const reencryptAction: KeyAction = {
  spec: {
    name: 'reencrypt',
    summary: 're-seal every secret with KEYGATE_SECRET_ENCRYPTION_KEY (after a key change)',
    options: [JSON_OPTION],
  },
  async run(ctx, p) {
    if (!ctx.encrypted) throw new CliError('KEYGATE_SECRET_ENCRYPTION_KEY is not set', 2);
    const resealed = await ctx.ops.reseal(ctx.actor);
    if (flag(p, 'json')) ctx.print({ resealed });
    else ctx.out.write(`re-sealed ${resealed} keys with the current encryption key\n`);
  },
};
