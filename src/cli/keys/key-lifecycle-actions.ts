// Tested in test/unit/keys-actions.test.ts (each action through main()).
import { parseDuration } from '../../keys/key-changes.js';
import { publicView } from '../../keys/key-record.js';
import { UsageError } from '../cli-errors.js';
import { flag, str } from '../command-line.js';
import { apiKeyOf, JSON_OPTION, opt, warnPlainSecrets, type KeyAction } from './key-context.js';
import { credentialFrom, CREDENTIAL_OPTIONS } from './key-credential-options.js';

/** `keygate keys rotate`, `revoke` and `delete`: a key's secret and its end. */

export const rotateAction: KeyAction = {
  spec: {
    name: 'rotate',
    summary: 'issue a new secret (or register a new public key); the old one keeps working for the grace period',
    args: ['<apiKey>'],
    options: [
      opt('grace', '300s', 'how long the old secret stays valid (0 = stops at once)'),
      ...CREDENTIAL_OPTIONS,
      JSON_OPTION,
    ],
  },
  async run(ctx, p) {
    const grace = str(p, 'grace');
    const graceMs = parseDuration(grace ?? '300s');
    if (graceMs === undefined) throw new UsageError(`--grace: expected a duration like 300s or 10m, got ${grace}`);
    const {
      record,
      secret,
      previousSecretValidUntil: until,
    } = ctx.must(await ctx.ops.rotate(apiKeyOf(p), graceMs, ctx.actor, undefined, credentialFrom(p)), apiKeyOf(p));
    if (secret !== undefined) warnPlainSecrets(ctx, 1);
    if (secret === undefined) {
      const view = publicView(record, ctx.now());
      if (flag(p, 'json'))
        ctx.print({
          apiKey: view.apiKey,
          id: view.id,
          alg: view.alg,
          publicKeyFingerprint: view.publicKeyFingerprint,
          previousSecretValidUntil: until,
        });
      else
        ctx.out.write(
          `Rotated ${view.apiKey} (${view.id})\n  alg:       ${view.alg}\n  publicKey: ${view.publicKeyFingerprint}\n  old credential accepted until ${until}\n`,
        );
    } else if (flag(p, 'json'))
      ctx.print({ apiKey: record.apiKey, apiSecret: secret, id: record.id, previousSecretValidUntil: until });
    else
      ctx.out.write(
        `Rotated ${record.apiKey} (${record.id})\n  new apiSecret: ${secret}\n  old secret accepted until ${until}\nThe new secret is shown only now.\n`,
      );
  },
};

export const revokeAction: KeyAction = {
  spec: {
    name: 'revoke',
    summary: 'stop a key working everywhere at once (it stays listed as revoked)',
    args: ['<apiKey>'],
    options: [
      opt('reason', 'text', 'recorded on the key and in the audit entry'),
      opt('json', undefined, 'print the revoked key as JSON'),
    ],
  },
  async run(ctx, p) {
    const r = ctx.must(await ctx.ops.revoke(apiKeyOf(p), str(p, 'reason'), ctx.actor), apiKeyOf(p));
    if (flag(p, 'json')) ctx.print(publicView(r, ctx.now()));
    else ctx.out.write(`revoked ${r.apiKey} (${r.id})\n`);
  },
};

export const deleteAction: KeyAction = {
  spec: {
    name: 'delete',
    summary: 'delete a key, its rate-limit state and its usage',
    args: ['<apiKey>'],
    options: [opt('json', undefined, 'print {"deleted": apiKey, "id": id}')],
  },
  async run(ctx, p) {
    const r = ctx.must(await ctx.ops.remove(apiKeyOf(p), ctx.actor), apiKeyOf(p));
    if (flag(p, 'json')) ctx.print({ deleted: r.apiKey, id: r.id });
    else ctx.out.write(`deleted ${r.apiKey} (${r.id})\n`);
  },
};
