/**
 * What a simulated host's protocol routes are built with (routes.ts for every version, v5-routes.ts
 * for v5's own): in a file of its own so the two route files do not import each other.
 */
import type { ServerResponse } from 'node:http';
import type { DevnetChainView, HostIdentity } from '../chain-view.js';
import type { HostFaults } from '../faults.js';
import type { HostSessions } from './session.js';

export interface ProtocolRouteContext {
  host: HostIdentity;
  sessions: HostSessions;
  /** The chain the host reads (escrows; v5: its block oracle). */
  chain: DevnetChainView;
  /** The version these routes serve: sessions opened here are this version's and hash its name as their tag. */
  version: string;
  /** Every simulated host (peer lookups: the executor's mempool for execution timeouts). */
  hosts: readonly HostIdentity[];
  faults: HostFaults;
  tokenDelayMs: number;
  now: () => number;
  open: Set<ServerResponse>;
  /** Largest accepted request body, bytes. */
  bodyLimit: number;
}
