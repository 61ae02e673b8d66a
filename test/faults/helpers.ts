/**
 * Shared pieces of the fault tests: a gateway whose chain client has short timeouts (so a held
 * mempool or a hanging node answers in seconds, not a minute), chain-side counters read straight
 * from the devnet state, and the escrow accounting every fault must leave exact.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCosmosChainClient, type CosmosChainClient } from '../../src/chain/cosmos-client.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import { generateKeys, loadConfig } from '../../src/config/index.js';
import { escrowStream } from '../../src/events/catalog.js';
import type { HostFaults } from '../../src/devnet/hosts/index.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { startGateway, type RunningGateway } from '../../src/main/start.js';
import { capturingLogger, httpCaller, sqliteStoreOf, testGatewayEnv, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';

export { MODEL, createEscrowViaApi } from '../helpers/gateway.js';

export interface FaultGateway extends Omit<TestGateway, 'restart' | 'devnet'> {
  devnet: Devnet;
  chainClient: CosmosChainClient;
  /** Restarts the gateway only (the devnet, like a real chain, keeps running). */
  restart(): Promise<FaultGateway>;
  /** Stops gateway and devnet, removes the storage. */
  dispose(): Promise<void>;
}

export interface FaultGatewayOptions {
  env?: Record<string, string>;
  /** Chain client timeouts (ms). */
  broadcastTimeoutMs?: number;
  requestTimeoutMs?: number;
  devnet?: Devnet;
  storageDir?: string;
  keys?: ReturnType<typeof generateKeys>;
}

export async function startFaultGateway(opts: FaultGatewayOptions = {}): Promise<FaultGateway> {
  const keys = opts.keys ?? generateKeys();
  const storageDir = opts.storageDir ?? mkdtempSync(join(tmpdir(), 'shardgate-faults-'));
  const env = testGatewayEnv(keys, storageDir, { GATEWAY_SHUTDOWN_TIMEOUT_MS: '3000', GATEWAY_RECONCILE_INTERVAL_MS: '200', ...opts.env });
  const config = loadConfig({ env, cwd: storageDir });
  const devnet =
    opts.devnet ??
    (await startDevnet({ env, chainId: config.chain.chainId, creators: [keys.privateKey], statePath: join(storageDir, 'devnet.sqlite'), port: 0 }));
  const chainClient = createCosmosChainClient({
    rpcUrl: devnet.rpcUrl,
    restUrl: devnet.url,
    nodeBaseUrl: devnet.url,
    chainId: config.chain.chainId,
    broadcastPollIntervalMs: 50,
    broadcastTimeoutMs: opts.broadcastTimeoutMs ?? 2_000,
    requestTimeoutMs: opts.requestTimeoutMs ?? 1_500,
  });
  const { logger, logs } = await capturingLogger(env.LOG_LEVEL!);
  const gw: RunningGateway = await startGateway(config, { logger, chain: chainClient });
  const t: FaultGateway = {
    ...gw,
    store: sqliteStoreOf(gw.store),
    devnet,
    chainClient,
    keys,
    storageDir,
    env,
    logs,
    call: httpCaller(gw.url, keys),
    async restart() {
      await gw.stop();
      chainClient.close();
      return startFaultGateway({ ...opts, devnet, storageDir, keys });
    },
    async dispose() {
      await gw.stop();
      chainClient.close();
      await devnet.close();
      rmSync(storageDir, { recursive: true, force: true });
    },
  };
  return t;
}

/** Escrows the devnet holds, by creator. */
export function chainEscrows(devnet: Devnet, creator?: string) {
  return Object.values(devnet.chain.state.escrows).filter((e) => creator === undefined || e.creator === creator);
}

/** Successful settle txs the chain executed for an escrow. */
export function settleTxsOnChain(devnet: Devnet, escrowId: string): number {
  let n = 0;
  for (const tx of Object.values(devnet.chain.state.txs)) {
    if (tx.result.code !== 0) continue;
    for (const e of tx.result.events) {
      if (e.type === 'devshard_escrow_settled' && e.attributes.some((a) => a.key === 'escrow_id' && a.value === String(escrowId))) n++;
    }
  }
  return n;
}

/** Successful create txs the chain executed (one escrow each). */
export function createTxsOnChain(devnet: Devnet): number {
  let n = 0;
  for (const tx of Object.values(devnet.chain.state.txs)) {
    if (tx.result.code === 0 && tx.result.events.some((e) => e.type === 'devshard_escrow_created')) n++;
  }
  return n;
}

/** Event types of an escrow's stream. */
export function streamTypes(gw: { store: { readStream(id: string): RecordedEvent[] } }, escrowId: string): string[] {
  return gw.store.readStream(escrowStream(escrowId)).map((r) => r.type);
}

/**
 * The escrow's accounting from its own stream: spent is the sum of the ended requests' costs (and
 * of usage recovered from hosts after a crash), balance = deposit − spent, and nothing is reserved
 * once nothing is in flight.
 */
export function accountingOf(gw: { store: { readStream(id: string): RecordedEvent[] } }, escrowId: string) {
  const recs = requestRecords(gw.store.readStream(escrowStream(escrowId)));
  let costs = 0n;
  let started = 0;
  let ended = 0;
  const nonces: number[] = [];
  for (const r of recs) {
    const d = r.data as { cost?: string; nonce?: number };
    if (r.type === 'InferenceStarted') {
      started++;
      nonces.push(d.nonce!);
    }
    if (r.type === 'InferenceFinished' || r.type === 'InferenceFailed') {
      ended++;
      costs += BigInt(d.cost!);
    }
    if (r.type === 'UsageRecovered') costs += BigInt(d.cost!);
  }
  return { costs, started, ended, nonces };
}

export async function waitFor<T>(f: () => T | Promise<T>, what: string, timeoutMs = 10_000, everyMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Replaces the simulated hosts' faults with `f` (the hosts read the object at each request). */
export function setHostFaults(devnet: Devnet, f: HostFaults): void {
  const faults = devnet.simulatedHosts.faults;
  for (const k of Object.keys(faults)) delete (faults as Record<string, unknown>)[k];
  Object.assign(faults, f);
}
