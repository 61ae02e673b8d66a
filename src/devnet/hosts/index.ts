/**
 * Simulated inference hosts, mounted on the devnet's fastify server: for each HostIdentity, under
 * its prefix (e.g. `/hosts/0`), the devshard host endpoints
 *   POST {prefix}/devshard/v1/sessions/{escrow_id}/chat/completions   (chat-route.ts)
 *   POST {prefix}/devshard/v1/sessions/{escrow_id}/sign               (sign-route.ts)
 * (an invented protocol the gateway still speaks), and beside them the real devshard host protocol
 *   {prefix}/v1/devshard/sessions/{escrow_id}/{chat/completions, verify-timeout, diffs, mempool,
 *   signatures}                                                         (protocol/routes.ts)
 * so a host's `inference_url` is origin + prefix.
 * Each host is a fastify child context with its own raw-body JSON parser (the signature covers the
 * exact bytes), so the devnet's own routes and parsers are untouched. Call before `app.ready()` /
 * `listen()`.
 */
import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { createSignatureVerifier } from '../../network/signature.js';
import type { DevnetChainView, HostIdentity } from './chain-view.js';
import { chatRoute } from './chat-route.js';
import type { HostFaults } from './faults.js';
import { HostLedger, type LedgerSnapshot, type SlotTally } from './ledger.js';
import { signRoute } from './sign-route.js';
import { HOST_ROUTE_PREFIX, protocolRoutes } from './protocol/routes.js';
import { HostSessions, type HostSessionStore } from './protocol/session.js';

export type { HostFaults } from './faults.js';
export type { LedgerSnapshot, SlotTally } from './ledger.js';
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
  /** Ledgers saved by `snapshot()` before a restart (DEVNET_STATE), keyed by host index. */
  restore?: Record<number, LedgerSnapshot>;
  /** Where the hosts keep the diffs they apply, so their sessions survive a restart (DEVNET_STATE). */
  sessionStore?: HostSessionStore;
  /** Called with a slot's new tally after each request a host records (the devnet writes it through). */
  persist?: (hostIndex: number, escrowId: string, tally: LedgerSnapshot[string][number]) => void;
}

export interface SimulatedHosts {
  /** The fault switches (the object passed in, or the one created). Mutate it to inject faults. */
  faults: HostFaults;
  /** What the hosts served for an escrow, one tally per slot that served anything. */
  served(escrowId: string): SlotTally[];
  /** One host's ledger, by HostIdentity.index. */
  ledger(hostIndex: number): HostLedger | undefined;
  /** Every host's ledger as JSON, for the devnet to persist (hosts refuse to sign what they forgot). */
  snapshot(): Record<number, LedgerSnapshot>;
  /** The hosts' sessions under the real protocol (replica, mempool, signatures per host and escrow). */
  protocol: HostSessions;
}

export function registerSimulatedHosts(app: FastifyInstance, opts: SimulatedHostsOptions): SimulatedHosts {
  const faults = opts.faults ?? {};
  const now = opts.now ?? Date.now;
  const verifier = createSignatureVerifier();
  const ledgers = new Map<number, HostLedger>();
  const open = new Set<ServerResponse>();
  const bodyLimit = opts.bodyLimit ?? 16 * 1024 * 1024;
  const sessions = new HostSessions(opts.chain, opts.sessionStore);

  for (const host of opts.hosts) {
    const persist = opts.persist;
    const ledger = HostLedger.from(opts.restore?.[host.index], persist ? (escrowId, tally) => persist(host.index, escrowId, tally) : undefined);
    ledgers.set(host.index, ledger);
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
        chatRoute(child, { chain: opts.chain, host, ledger, tokenDelayMs: opts.tokenDelayMs, faults, now, verifier, open });
        signRoute(child, { chain: opts.chain, host, ledger });
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
    served(escrowId) {
      const out: SlotTally[] = [];
      for (const l of ledgers.values()) out.push(...l.tallies(escrowId));
      return out.sort((a, b) => a.slotId - b.slotId);
    },
    ledger: (i) => ledgers.get(i),
    snapshot() {
      const out: Record<number, LedgerSnapshot> = {};
      for (const [i, l] of ledgers) out[i] = l.snapshot();
      return out;
    },
  };
}
