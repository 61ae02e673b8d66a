/**
 * Simulated inference hosts, mounted on the devnet's fastify server: for each HostIdentity, under
 * its prefix (e.g. `/hosts/0`), the real devshard host protocol
 *   {prefix}/v1/devshard/sessions/{escrow_id}/{chat/completions, verify-timeout, diffs, mempool,
 *   signatures}                                                         (protocol/routes.ts)
 * so a host's `inference_url` is origin + prefix.
 * Each host is a fastify child context with its own raw-body JSON parser (the signature covers the
 * exact bytes), so the devnet's own routes and parsers are untouched. Call before `app.ready()` /
 * `listen()`.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { DevnetChainView, HostIdentity } from './chain-view.js';
import type { HostFaults } from './faults.js';
import { HOST_ROUTE_PREFIX, protocolRoutes } from './protocol/routes.js';
import { HostSessions, type HostSessionStore } from './protocol/session.js';

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
}

export interface SimulatedHosts {
  /** The fault switches (the object passed in, or the one created). Mutate it to inject faults. */
  faults: HostFaults;
  /** The hosts' sessions under the real protocol (replica, mempool, signatures per host and escrow). */
  protocol: HostSessions;
}

export function registerSimulatedHosts(app: FastifyInstance, opts: SimulatedHostsOptions): SimulatedHosts {
  const faults = opts.faults ?? {};
  const now = opts.now ?? Date.now;
  const open = new Set<ServerResponse>();
  const bodyLimit = opts.bodyLimit ?? 16 * 1024 * 1024;
  const sessions = new HostSessions(opts.chain, opts.sessionStore);

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
        void child.register(async (proto) => protocolRoutes(proto, { host, sessions, hosts: opts.hosts, faults, tokenDelayMs: opts.tokenDelayMs, now, open, bodyLimit }), {
          prefix: HOST_ROUTE_PREFIX,
        });
      },
      { prefix: host.prefix },
    );
  }

  return {
    faults,
    protocol: sessions,
  };
}
