import type { OwnerStore } from '../store/store.js';

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
