/**
 * The versions the simulated hosts serve and the rule set of each. The hosts follow the network,
 * not the gateway: v5 ("Z5", zpoken/gonka@86cff503, release 0.2.15-devshard-v5) is served under
 * `/devshard/v5` whether or not the gateway's table (src/protocol/versions.ts) lists it yet, so the
 * gateway's v5 session has real twins to talk to. Every other name is the gateway's own entry.
 */
import { SUPPORTED_VERSION_NAMES, versionSpec, type RuleSet } from '../../../protocol/versions.js';

/** The network's newest version with a coherent source, served by the hosts from the start. */
export const HEIGHT_SYNC_VERSION = 'v5';

/** Oldest first, as versiond's route table lists them (the last is the newest). */
export const HOST_VERSION_NAMES: readonly string[] = SUPPORTED_VERSION_NAMES.includes(HEIGHT_SYNC_VERSION)
  ? SUPPORTED_VERSION_NAMES
  : [...SUPPORTED_VERSION_NAMES, HEIGHT_SYNC_VERSION];

/** The rule set a host binds a session of `version` to (v2 for names the table does not know). */
export function hostRules(version: string): RuleSet {
  return versionSpec(version)?.rules ?? (version === HEIGHT_SYNC_VERSION ? 'v5' : 'v2');
}

/** Newest-first order of two version names (unknown names last). */
export const hostVersionOrder = (v: string): number => HOST_VERSION_NAMES.indexOf(v);
