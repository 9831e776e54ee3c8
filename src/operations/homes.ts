import { StoreUnavailableError, type CreditHolder, type CreditStore, type OwnerStore } from '../store/store.js';

/**
 * What the key operations know of regions (docs/regions.md "Homes"): the regions listed, this instance's (or the
 * CLI's KEYGATE_REGION) and the default home. Undefined: regions are off, and a `home` is refused.
 */
export interface HomeRules {
  readonly self: string | undefined;
  readonly names: readonly string[];
  readonly defaultHome: string;
}

/**
 * The home a key is written with, or the problems with it. A key with an owner lives at its owner's home (the
 * owner's budget and its keys' are charged on one Redis), so a different one is refused, naming the field; a
 * key without a `home` given gets its owner's, else this instance's region. `current`: the key's home now
 * (update), to tell a move.
 */
export async function keyHome(
  rules: HomeRules | undefined,
  store: Pick<OwnerStore, 'readOwner'>,
  owner: string | undefined,
  home: string | undefined,
  creating: boolean,
): Promise<{ home?: string; problems: string[] }> {
  if (rules === undefined)
    return home === undefined
      ? { problems: [] }
      : { problems: ['key.home: regions are off (no regions: in the policy file, or KEYGATE_REGION unset)'] };
  if (home !== undefined && !rules.names.includes(home))
    return {
      problems: [`key.home: ${JSON.stringify(home)} is not a region listed under regions: (${rules.names.join(', ')})`],
    };
  const ownerHome = owner === undefined ? undefined : ((await store.readOwner(owner))?.home ?? rules.defaultHome);
  if (home !== undefined && ownerHome !== undefined && home !== ownerHome)
    return {
      problems: [
        `key.home: ${JSON.stringify(home)} differs from the home of its owner ${owner} (${ownerHome}): a key lives where its owner does (set the owner's home instead)`,
      ],
    };
  if (home !== undefined) return { home, problems: [] };
  if (!creating) return { problems: [] };
  return { home: ownerHome ?? rules.self ?? rules.defaultHome, problems: [] };
}

/** An owner's home as set: listed, or the problem. */
export function ownerHomeProblems(rules: HomeRules | undefined, home: string): string[] {
  if (rules === undefined)
    return ['owner.home: regions are off (no regions: in the policy file, or KEYGATE_REGION unset)'];
  return rules.names.includes(home)
    ? []
    : [`owner.home: ${JSON.stringify(home)} is not a region listed under regions: (${rules.names.join(', ')})`];
}

/** What a move's audit entry says when its balances were not carried (the operator's answer says why). */
export const CREDITS_NOT_CARRIED = 'credits not carried';

/**
 * A home move's credits (docs/regions.md "Moving a home"): each holder's balance copied from the old home's
 * request-state Redis to the new home's (Store.moveCredits), before the move is written. Answers the warning to
 * show when they could not be, undefined when they were (or there is nothing to carry). The move goes ahead
 * either way: moving away from a home that does not answer is the runbook's case, and the balance at the new home
 * then starts from what it has there (the credits as set, or an earlier stay's), which the warning says.
 */
export async function carryCredits(
  store: Pick<CreditStore, 'moveCredits'>,
  holders: readonly CreditHolder[],
  move: { readonly from: string; readonly to: string; readonly whose: string },
): Promise<string | undefined> {
  const { from, to, whose } = move;
  if (holders.length === 0 || from === to) return undefined;
  const after =
    `spends at ${to} start from the credits as last set (or from what an earlier stay at ${to} left), ` +
    'not from what was left: read them and set them again if needed';
  const not = `${whose}: credits balance not carried from ${from} to ${to}`;
  if (store.moveCredits === undefined)
    return `${not}: this process holds no connection to the regions' request-state Redis; ${after}`;
  try {
    await store.moveCredits(holders, from, to);
    return undefined;
  } catch (err) {
    if (!(err instanceof StoreUnavailableError)) throw err;
    return `${not} (${err.message}): ${after}`;
  }
}
