/**
 * startDevnet: the embedded devnet on one loopback fastify server (JSON-RPC at `/`, REST, the
 * governance model list, and the simulated hosts under /hosts/<i>). Used by `shardgate devnet`,
 * by `serve` when NODE_RPC is unset, and by tests (ephemeral port, fast blocks, jumps in height).
 */
import Fastify from 'fastify';
import type { HostIdentity } from '../hosts/chain-view.js';
import { DevnetChain } from './chain.js';
import { resolveDevnetConfig, type DevnetConfig, type DevnetOptions, type ExternalHost } from './config.js';
import { genesisIdentities, genesisState, type FundedKey } from './genesis.js';
import { listenDevnet } from './listen.js';
import { approvedVersionEntries, completeParams } from './params.js';
import { openHostSessionStore } from './host-sessions-store.js';
import { openStateStore } from './persistence.js';
import { registerRestRoutes } from './rest-routes.js';
import { registerRpcRoutes } from './rpc-routes.js';
import { registerSimulatedHosts, type SimulatedHosts } from '../hosts/index.js';

export interface Devnet {
  /** Origin, e.g. `http://127.0.0.1:26657` (NODE_CHAIN_API and NODE_BASE). */
  url: string;
  /** `url` + `/` (NODE_RPC ends with a slash). */
  rpcUrl: string;
  chainId: string;
  /** Allowlisted, funded creators given as keys (or the default generated one). */
  creators: FundedKey[];
  /** Allowlisted creator addresses, including those given without a key. */
  creatorAddresses: string[];
  /** Funded but not allowlisted. */
  notAllowlisted: FundedKey;
  /** The simulated hosts' identities (slot i = host i). */
  hosts: HostIdentity[];
  /** Hosts the devnet does not run (DEVNET_EXTERNAL_HOSTS): slots hosts.length + i. */
  externalHosts: ExternalHost[];
  /** The simulated hosts mounted under /hosts/<i>: their protocol sessions, fault switches. */
  simulatedHosts: SimulatedHosts;
  config: DevnetConfig;
  /** In-process handle: height, advance / jumpTo, waitForHeight, faults, state. */
  chain: DevnetChain;
  close(): Promise<void>;
}

export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const config = resolveDevnetConfig(options);
  const ids = genesisIdentities(config);
  const store = config.statePath ? openStateStore(config.statePath) : undefined;
  const sessionStore = config.statePath ? openHostSessionStore(config.statePath) : undefined;
  const state = store?.load() ?? genesisState(config, ids);
  state.params = completeParams(state.params, config);
  // Snapshots older than the approved-versions store and the grants: the configured genesis ones
  // (not the params' old list, which named versions the gateway no longer speaks).
  state.approvedVersions ??= approvedVersionEntries(config.approvedVersions);
  state.authzGrants ??= config.warmKeyGrants.map((g) => ({ ...g }));
  const chain = new DevnetChain(config, ids.hosts, state, store);

  const app = Fastify({ logger: config.logRequests, bodyLimit: 8 * 1024 * 1024 });
  registerRpcRoutes(app, chain);
  registerRestRoutes(app, chain);
  const simulatedHosts = registerSimulatedHosts(app, {
    chain,
    hosts: ids.hosts,
    tokenDelayMs: config.tokenDelayMs,
    // DEVNET_HOST_VERSIONS, DEVNET_LEGACY_ROUTE: from the same environment as the rest of the devnet's settings.
    env: options.env ?? process.env,
    ...(sessionStore ? { sessionStore } : {}),
  });
  let url: string;
  try {
    // A restored devnet comes back on its previous port, so recorded slot URLs stay valid.
    url = await listenDevnet(app, state, config.port);
  } catch (e) {
    chain.close();
    sessionStore?.close();
    throw e;
  }
  chain.baseUrl = url;
  chain.start();

  return {
    url,
    rpcUrl: `${url}/`,
    chainId: chain.chainId,
    creators: ids.creators,
    creatorAddresses: ids.creatorAddresses,
    notAllowlisted: ids.notAllowlisted,
    hosts: ids.hosts,
    externalHosts: ids.externalHosts,
    simulatedHosts,
    config,
    chain,
    async close() {
      chain.close();
      await app.close();
      sessionStore?.close();
      // Clients in this same process (tests) must see their keep-alive sockets closed before a
      // new devnet may take the same port (the OS often hands the freed port out again at once).
      await new Promise((r) => setTimeout(r, 20));
    },
  };
}
