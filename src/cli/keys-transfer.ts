import { randomBytes } from 'node:crypto';
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { toExternal, type KeyRecord } from '../store/key-record.js';
import { KeysFileError, loadKeysFile } from '../store/keys-file.js';
import type { KeyActionContext, KeyActionValues } from './keys-actions.js';

type Save = (record: KeyRecord, action: string, detail?: string) => Promise<void>;

/**
 * Export in the keys-file format, so a file exported with --with-secrets can
 * be imported elsewhere or used as KEYGATE_KEYS_FILE. Without --with-secrets
 * no secret (current or previous) leaves Redis.
 */
export async function exportKeys(v: KeyActionValues, ctx: KeyActionContext): Promise<number> {
  const keys = (await ctx.store.listKeys()).map((r) => {
    const o = toExternal(r);
    if (!v['with-secrets']) {
      delete o.apiSecret;
      delete o.previousSecrets;
    }
    return o;
  });
  const doc = { keys };
  const json = v.json || v.out?.endsWith('.json');
  const text = json ? `${JSON.stringify(doc, null, 2)}\n` : `# keygate keys export${v['with-secrets'] ? ' (WITH SECRETS: protect this file)' : ' (no secrets: not importable)'}\n${toYaml(doc)}`;
  if (v.out) {
    writePrivateFile(v.out, text);
    ctx.err.write(`exported ${keys.length} keys to ${v.out}${v['with-secrets'] ? ' with secrets' : ''}\n`);
  } else {
    ctx.out.write(text);
  }
  ctx.audit({ at: new Date(ctx.now()).toISOString(), actor: ctx.actor, action: v['with-secrets'] ? 'export-with-secrets' : 'export', apiKey: '*', id: '*', detail: `${keys.length} keys` });
  return 0;
}

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

/** Import a keys file: everything is validated before anything is written. Existing keys are kept unless --replace. */
export async function importKeys(file: string, v: KeyActionValues, ctx: KeyActionContext, save: Save): Promise<number> {
  let records: KeyRecord[];
  try {
    records = loadKeysFile(file);
  } catch (err) {
    if (!(err instanceof KeysFileError)) throw err;
    ctx.err.write(`keygate keys import: nothing imported:\n  - ${err.problems.join('\n  - ')}\n`);
    return 2;
  }
  let created = 0;
  let replaced = 0;
  let skipped = 0;
  for (const r of records) {
    const existing = await ctx.store.getKey(r.apiKey);
    if (existing && !v.replace) {
      skipped++;
      continue;
    }
    await save(r, existing ? 'import-replace' : 'import');
    if (existing) replaced++;
    else created++;
  }
  ctx.out.write(`imported ${created} new, replaced ${replaced}, skipped ${skipped} existing (use --replace to overwrite)\n`);
  return 0;
}

/** Re-writes every key so its secrets are sealed with the current encryption key. */
export async function reencryptKeys(ctx: KeyActionContext, save: Save): Promise<number> {
  if (!ctx.encrypted) {
    ctx.err.write('keygate keys reencrypt: KEYGATE_SECRET_ENCRYPTION_KEY is not set\n');
    return 2;
  }
  const all = await ctx.store.listKeys();
  for (const r of all) await save(r, 'reencrypt');
  ctx.out.write(`re-sealed ${all.length} keys with the current encryption key\n`);
  return 0;
}
