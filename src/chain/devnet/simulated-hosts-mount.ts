/**
 * Mounts the simulated inference hosts (src/network/simulated-hosts, built by the network side)
 * on the devnet server, each under /hosts/<i>. The module is loaded by name at run time so the
 * devnet keeps working while that module does not exist yet; once it does, it is mounted.
 */
import type { FastifyInstance } from 'fastify';
import type { DevnetChainView, HostIdentity } from '../../network/simulated-hosts/chain-view.js';

export interface SimulatedHostsOptions {
  chain: DevnetChainView;
  hosts: HostIdentity[];
  tokenDelayMs: number;
}

type RegisterSimulatedHosts = (app: FastifyInstance, options: SimulatedHostsOptions) => unknown;

const MODULE = '../../network/simulated-hosts/index.js';

function isModuleNotFound(e: unknown): boolean {
  const code = (e as { code?: string }).code;
  const message = String((e as Error).message ?? '');
  return code === 'ERR_MODULE_NOT_FOUND' || /Cannot find module|Failed to load url|Does the file exist/i.test(message);
}

/** Returns whether the hosts were mounted. */
export async function mountSimulatedHosts(app: FastifyInstance, options: SimulatedHostsOptions): Promise<boolean> {
  let mod: { registerSimulatedHosts?: RegisterSimulatedHosts };
  try {
    mod = (await import(MODULE)) as { registerSimulatedHosts?: RegisterSimulatedHosts };
  } catch (e) {
    if (isModuleNotFound(e)) return false;
    throw e;
  }
  if (typeof mod.registerSimulatedHosts !== 'function') return false;
  await mod.registerSimulatedHosts(app, options);
  return true;
}
