/**
 * The devshard protocol versions this gateway speaks, and what each one changes. The one place in
 * the code that knows a version's name: everything else asks this table (by an escrow's recorded
 * `EscrowProtocol`) for its route, its state-root tag and its rule set.
 *
 * Sources (../shared/notes/network-versions.md):
 * - v2: gonka 8a35022; hosts serve it under the legacy prefix `/v1/devshard` (no `/devshard/v2`
 *   route existed then), state-root tag "v2".
 * - v3: 59b1ee7e; no rule or hash under devshard/state changed since 8a35022; served under
 *   `/devshard/v3` (versiond), the legacy prefix answers 410.
 * - v4, v4.1: gonka's pinned roots of a `release/devshard/v4.1.0` build
 *   (gonka-ai/gonka@bb34d444 devshard/state/testdata/v41-state-roots.json) are v2's rules with the
 *   tag "v4.1" (test/protocol/v41-state-roots.test.ts).
 * - The route: devshard/paths.go `ResolveRoutePrefix` (Z5) accepts exactly `/devshard/<name>`;
 *   anything else is `unsupported devshard route prefix %q`.
 * - The tag is a stamp of the host's build, by default the version's name (Z5 types/domain.go);
 *   an escrow may name another (`state_root_version`) when its hosts were stamped otherwise.
 */

/**
 * The rule sets we implement: the state machine, hashes and tx kinds a version uses.
 * - v2: gonka 8a35022 (v2, v3, v4, v4.1 use it).
 * - v5: height-sync (zpoken/gonka@86cff503, "Z5"): rest_hash with height_sync_hash, record heights,
 *   stamps, tx kinds 9/10/11/14, the log plane and its floor, the max_tokens floor, v5's seal gate and
 *   settlement drain. Not yet an entry of PROTOCOL_VERSIONS: the gateway side of v5 comes first.
 */
export type RuleSet = 'v2' | 'v5';

export interface VersionSpec {
  /** The approved-version name (`approved_versions[].name`, the route's segment). */
  name: string;
  rules: RuleSet;
  /** The route prefix its hosts serve it under by default. */
  defaultRoute: string;
  /** What this version changes, for docs and status. */
  changes: string;
  /** Where that was read. */
  source: string;
  /**
   * False: spoken when an escrow names it (protocol_version, route_prefix, DEVSHARD_PROTOCOL_VERSION),
   * never chosen by default. v5 until the gateway runs its idle heartbeats and error-miss votes.
   */
  byDefault?: false;
}

/** v2's route: the host API's in-process prefix at 8a35022, retired (410) since chain v0.2.14. */
export const LEGACY_ROUTE_PREFIX = '/v1/devshard';

/** Oldest first; the last is the newest we speak. */
export const PROTOCOL_VERSIONS: readonly VersionSpec[] = [
  { name: 'v2', rules: 'v2', defaultRoute: LEGACY_ROUTE_PREFIX, changes: 'the v2 state machine, hashes and host routes; served under /v1/devshard', source: 'gonka 8a35022 (devshard v2, #1289)' },
  { name: 'v3', rules: 'v2', defaultRoute: '/devshard/v3', changes: 'v2 rules under a versioned route; /v1/devshard answers 410', source: 'gonka 59b1ee7e (chain v0.2.14, #1267, #1386)' },
  { name: 'v4', rules: 'v2', defaultRoute: '/devshard/v4', changes: 'v2 rules under /devshard/v4 (create and settle over chain gRPC in the reference gateway)', source: 'gonka #1482 (chain v0.2.15)' },
  { name: 'v4.1', rules: 'v2', defaultRoute: '/devshard/v4.1', changes: 'v2 rules with the tag "v4.1"', source: 'gonka-ai/gonka@bb34d444 devshard/state/testdata/v41-state-roots.json (35 of 35 roots)' },
  {
    name: 'v5',
    rules: 'v5',
    defaultRoute: '/devshard/v5',
    changes: 'height-sync: stamps on starts, confirms, finishes and receipts, heartbeats, acks, forced turns, the log plane and its floor, error-miss refunds, max_tokens ≥ 64',
    source: 'zpoken/gonka@86cff503 ("Z5", release 0.2.15-devshard-v5; golden vectors s5a-s5e executed from it)',
    byDefault: false,
  },
];

export const SUPPORTED_VERSION_NAMES: readonly string[] = PROTOCOL_VERSIONS.map((v) => v.name);

/** The versions an escrow gets when it names none, oldest first. */
const DEFAULT_VERSIONS = PROTOCOL_VERSIONS.filter((v) => v.byDefault !== false);

/** The newest version an escrow gets by default. */
export const NEWEST_VERSION = DEFAULT_VERSIONS[DEFAULT_VERSIONS.length - 1]!.name;

/** What an escrow's session speaks, as recorded in the log when it is created, registered or imported. */
export interface EscrowProtocol {
  /** An entry of PROTOCOL_VERSIONS ("v4.1"). */
  version: string;
  /** `/devshard/<name>`, or `/v1/devshard` for a v2 escrow. */
  route: string;
  /** The state-root tag hashed into every root and named by the settlement. */
  tag: string;
}

/** What an escrow recorded before versions were recorded speaks: v2 on the legacy route (replay stays exact). */
export const LEGACY_PROTOCOL: EscrowProtocol = Object.freeze({ version: 'v2', route: LEGACY_ROUTE_PREFIX, tag: 'v2' });

export function versionSpec(name: string): VersionSpec | undefined {
  return PROTOCOL_VERSIONS.find((v) => v.name === name);
}

/** A version refused: the text names the rule and what we speak. */
export class VersionError extends Error {
  override name = 'VersionError';
}

/**
 * A version as operators and devshardctl write it, to its approved-version name: "4.1", "v4.1" and
 * "V4.1" are "v4.1" (devshardctl's `ParseProtocolVersion` strips v/V). devshardctl's v2-era stamp
 * "1" (and "", "v1") named the protocol our "v2" is (8a35022 types/domain.go), so it reads as "v2".
 * Throws VersionError for a version we do not speak.
 */
export function parseProtocolVersion(input: string): string {
  const raw = input.trim();
  const bare = raw.replace(/^[vV]/, '');
  if (!/^[0-9]+(\.[0-9]+)?$/.test(bare)) throw new VersionError(`protocol version ${JSON.stringify(raw)} is not a version: write N or N.M, with or without a leading v (one of ${SUPPORTED_VERSION_NAMES.join(', ')})`);
  const name = bare === '1' ? 'v2' : `v${bare}`;
  if (!versionSpec(name)) throw new VersionError(`protocol version ${JSON.stringify(raw)} is not one this gateway speaks (${SUPPORTED_VERSION_NAMES.join(', ')})`);
  return name;
}

/**
 * A route prefix to the version its hosts serve there: `/devshard/<name>` (ResolveRoutePrefix's only
 * form, its words for anything else), or the legacy `/v1/devshard`, which only v2 hosts serve.
 * Answers undefined for a well-formed `/devshard/<name>` whose name we do not speak.
 */
export function versionOfRoute(prefix: string): string | undefined {
  const p = prefix.replace(/\/+$/, '');
  if (p === LEGACY_ROUTE_PREFIX) return 'v2';
  const m = /^\/devshard\/([^/]+)$/.exec(p);
  if (!m) throw new VersionError(`unsupported devshard route prefix ${JSON.stringify(prefix)}: hosts serve /devshard/<version> (or /v1/devshard for a v2 escrow)`);
  return versionSpec(m[1]!) ? m[1] : undefined;
}

export interface ProtocolChoice {
  /** The body's protocol_version (any form parseProtocolVersion reads). */
  version?: string;
  /** The body's route_prefix. */
  route?: string;
  /** The body's state_root_version. */
  tag?: string;
}

export interface ProtocolDefaults {
  /** DEVSHARD_PROTOCOL_VERSION. */
  version?: string;
  /** DEVSHARD_ROUTE_PREFIX (an explicit override of every escrow's route). */
  route?: string;
  /** DEVSHARD_STATE_ROOT_VERSION. */
  tag?: string;
  /** The chain's approved names; empty: the chain accepts any version. */
  approved: readonly string[];
}

/**
 * An escrow's protocol from what its create / register / import named, then the gateway's settings,
 * then the chain: the version is the body's, else the route's (body, then DEVSHARD_ROUTE_PREFIX),
 * else DEVSHARD_PROTOCOL_VERSION, else the newest we speak that the chain approves (the newest we
 * speak when the list is empty). The route is the body's, else DEVSHARD_ROUTE_PREFIX, else the
 * version's own. The tag is the body's, else DEVSHARD_STATE_ROOT_VERSION, else the version's name.
 * Throws VersionError when they do not fit together.
 */
export function chooseProtocol(c: ProtocolChoice, d: ProtocolDefaults): EscrowProtocol {
  const route = c.route?.trim() || d.route;
  const routeVersion = route !== undefined ? versionOfRoute(route) : undefined;
  if (route !== undefined && routeVersion === undefined) throw new VersionError(`route prefix ${JSON.stringify(route)} names a version this gateway does not speak (${SUPPORTED_VERSION_NAMES.join(', ')})`);
  let version: string;
  if (c.version?.trim()) version = parseProtocolVersion(c.version);
  else if (routeVersion !== undefined) version = routeVersion;
  else if (d.version?.trim()) version = parseProtocolVersion(d.version);
  else version = newestApproved(d.approved);
  if (routeVersion !== undefined && routeVersion !== version) {
    throw new VersionError(`route prefix ${JSON.stringify(route)} serves ${routeVersion}, not the escrow's protocol version ${version}: name one of them, or both alike`);
  }
  const tag = c.tag?.trim() || d.tag?.trim() || version;
  return { version, route: route?.replace(/\/+$/, '') ?? versionSpec(version)!.defaultRoute, tag };
}

/** The newest default version that `approved` lists (any, when it is empty); VersionError when none. */
export function newestApproved(approved: readonly string[]): string {
  if (approved.length === 0) return NEWEST_VERSION;
  for (let i = DEFAULT_VERSIONS.length - 1; i >= 0; i--) if (approved.includes(DEFAULT_VERSIONS[i]!.name)) return DEFAULT_VERSIONS[i]!.name;
  const named = approved.filter((a) => versionSpec(a));
  if (named.length > 0) {
    throw new VersionError(`the chain approves ${approved.join(', ')}; of them this gateway speaks ${named.join(', ')} only when an escrow names it: set protocol_version (POST /v1/admin/escrows) or DEVSHARD_PROTOCOL_VERSION`);
  }
  throw new VersionError(`the chain approves ${approved.join(', ')}, and this gateway speaks none of them (${SUPPORTED_VERSION_NAMES.join(', ')})`);
}

/** The rule set of a recorded protocol (an unknown version name is a log we cannot replay). */
export function rulesOf(p: Pick<EscrowProtocol, 'version'>): RuleSet {
  const v = versionSpec(p.version);
  if (!v) throw new VersionError(`protocol version ${JSON.stringify(p.version)} is not one this gateway speaks (${SUPPORTED_VERSION_NAMES.join(', ')})`);
  return v.rules;
}
