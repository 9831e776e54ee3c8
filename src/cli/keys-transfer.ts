import { writeFileSync } from 'node:fs';
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
    writeFileSync(v.out, text, { mode: 0o600 });
    ctx.err.write(`exported ${keys.length} keys to ${v.out}${v['with-secrets'] ? ' with secrets' : ''}\n`);
  } else {
    ctx.out.write(text);
  }
  ctx.audit({ at: new Date(ctx.now()).toISOString(), actor: ctx.actor, action: v['with-secrets'] ? 'export-with-secrets' : 'export', apiKey: '*', id: '*', detail: `${keys.length} keys` });
  return 0;
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
