/**
 * Simulated inference hosts, mounted on the devnet's fastify server: for each HostIdentity, under
 * its prefix (e.g. `/hosts/0`), the real devshard host protocol of each version it serves, as a
 * real host serves it behind versiond (one devshardd per version, each with its own sessions)
 *   {prefix}/devshard/<version>/sessions/{escrow_id}/{chat/completions, verify-timeout, diffs,
 *   mempool, signatures}                                                 (protocol/routes.ts)
 *   and, under a v5 route, {height-sync, verify-error-miss}              (protocol/v5-routes.ts)
 * a session opened there hashing `<version>` as its state-root tag; versiond's answers around them
 * (an unserved version, health, the versionless observability GETs) and the host API's 410 for the
 * retired `{prefix}/v1/devshard[/*]` (protocol/versiond.ts), unless the legacy route is kept: then
 * `{prefix}/v1/devshard/sessions/…` serves v2 (tag "v2", the sessions of `/devshard/v2`).
 * A host's `inference_url` is origin + prefix.
 * Each host is a fastify child context with its own raw-body JSON parser (the signature covers the
 * exact bytes), so the devnet's own routes and parsers are untouched. Call before `app.ready()` /
 * `listen()`.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { DevnetChainView, HostIdentity } from './chain-view.js';
import type { HostFaults } from './faults.js';
import { HOST_VERSION_NAMES } from './protocol/host-versions.js';
import { HOST_ROUTE_PREFIX, protocolRoutes, VERSIONED_ROUTE_ROOT } from './protocol/routes.js';
import { HostSessions, LEGACY_SESSION_VERSION, type HostSessionStore } from './protocol/session.js';
import { legacyRouteGone, versiondRoutes } from './protocol/versiond.js';

export type { HostFaults } from './faults.js';
export { registerSimulatedOpenAi, type SimulatedOpenAiOptions } from './openai-server.js';

export interface SimulatedHostsOptions {
  chain: DevnetChainView;
  hosts: HostIdentity[];
  /** Delay before each streamed token chunk, ms (DEVNET_TOKEN_DELAY_MS). Non-streamed answers are not delayed. */
  tokenDelayMs: number;
  /** Shared, mutable fault switches; default: a fresh empty object (see the returned handle). */
  faults?: HostFaults;
  /** Host clock in ms (tests); default Date.now. */
  now?: () => number;
  /** Largest accepted request body, bytes (default 16 MiB). */
  bodyLimit?: number;
  /** Where the hosts keep the diffs they apply, so their sessions survive a restart (DEVNET_STATE). */
  sessionStore?: HostSessionStore;
  /**
   * The versions served under `/devshard/<name>` (DEVNET_HOST_VERSIONS; default: every version the
   * hosts serve, HOST_VERSION_NAMES: the gateway's versions and v5). Each must be one of those.
   */
  versions?: readonly string[];
  /**
   * Keep v2's `/v1/devshard` route (tag "v2") instead of the host API's 410, for old logs and
   * clients (DEVNET_LEGACY_ROUTE=1; default off, as on the live network).
   */
  legacyRoute?: boolean;
  /** Where DEVNET_HOST_VERSIONS and DEVNET_LEGACY_ROUTE are read when the two above are absent (default process.env). */
  env?: NodeJS.ProcessEnv;
}

export interface SimulatedHosts {
  /** The fault switches (the object passed in, or the one created). Mutate it to inject faults. */
  faults: HostFaults;
  /** The hosts' sessions under the real protocol (replica, mempool, signatures per host, version and escrow). */
  protocol: HostSessions;
  /** The versions served under `/devshard/<name>`. */
  versions: readonly string[];
  /** Whether `/v1/devshard` serves v2 (else it answers 410). */
  legacyRoute: boolean;
}

/**
 * DEVNET_HOST_VERSIONS: version names, comma-separated (spaces trimmed, empty entries and repeats
 * dropped); unset or empty: every version the hosts serve. Any other name is refused (the hosts
 * would not know its rules).
 */
export function parseHostVersions(value: string | readonly string[] | undefined, name = 'DEVNET_HOST_VERSIONS'): string[] {
  if (value === undefined || (typeof value === 'string' && value.trim() === '')) return [...HOST_VERSION_NAMES];
  const list = (typeof value === 'string' ? value.split(',') : [...value]).map((v) => v.trim()).filter((v) => v !== '');
  for (const v of list) {
    if (!HOST_VERSION_NAMES.includes(v)) throw new Error(`${name}: ${JSON.stringify(v)} is not a version the simulated hosts serve (${HOST_VERSION_NAMES.join(', ')})`);
  }
  return [...new Set(list)];
}

/** DEVNET_LEGACY_ROUTE: 1/true/on/yes keep `/v1/devshard`; 0/false/off/no or unset answer 410. */
export function parseLegacyRoute(value: string | undefined, name = 'DEVNET_LEGACY_ROUTE'): boolean {
  const v = (value ?? '').trim().toLowerCase();
  if (['1', 'true', 'on', 'yes'].includes(v)) return true;
  if (['', '0', 'false', 'off', 'no'].includes(v)) return false;
  throw new Error(`${name} must be 1 or 0 (true/false, on/off, yes/no), not ${JSON.stringify(value)}`);
}

export function registerSimulatedHosts(app: FastifyInstance, opts: SimulatedHostsOptions): SimulatedHosts {
  const faults = opts.faults ?? {};
  const now = opts.now ?? Date.now;
  const open = new Set<ServerResponse>();
  const bodyLimit = opts.bodyLimit ?? 16 * 1024 * 1024;
  const sessions = new HostSessions(opts.chain, opts.sessionStore);
  const env = opts.env ?? process.env;
  const versions = opts.versions !== undefined ? parseHostVersions(opts.versions, 'versions') : parseHostVersions(env.DEVNET_HOST_VERSIONS);
  const legacyRoute = opts.legacyRoute ?? parseLegacyRoute(env.DEVNET_LEGACY_ROUTE);

  for (const host of opts.hosts) {
    void app.register(
      async (child) => {
        // Keep the exact bytes: the creator's signature is over them, not over re-serialised JSON.
        // Replaced in this child context only (the devnet may have its own JSON parser at the root).
        if (child.hasContentTypeParser('application/json')) child.removeContentTypeParser('application/json');
        child.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit }, (_req, body, done) => done(null, body));
        // A stalled stream would otherwise hold the server open on close.
        child.addHook('onClose', async () => {
          for (const res of open) res.destroy();
        });
        const common = { host, sessions, chain: opts.chain, hosts: opts.hosts, faults, tokenDelayMs: opts.tokenDelayMs, now, open, bodyLimit };
        for (const version of versions) {
          void child.register(async (proto) => protocolRoutes(proto, { ...common, version }), { prefix: `${VERSIONED_ROUTE_ROOT}/${version}` });
        }
        void child.register(async (v) => versiondRoutes(v, { host, sessions, versions, bodyLimit }), { prefix: VERSIONED_ROUTE_ROOT });
        if (legacyRoute) void child.register(async (proto) => protocolRoutes(proto, { ...common, version: LEGACY_SESSION_VERSION }), { prefix: HOST_ROUTE_PREFIX });
        else void child.register(async (gone) => legacyRouteGone(gone, bodyLimit));
      },
      { prefix: host.prefix },
    );
  }

  return {
    faults,
    protocol: sessions,
    versions,
    legacyRoute,
  };
}
