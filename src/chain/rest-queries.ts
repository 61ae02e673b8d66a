/**
 * REST reads of the chain (NODE_CHAIN_API) and the node (NODE_BASE), parsed into the port's types.
 * Tolerant of cosmos-style encodings: integers may come as strings or numbers; escrow slots may be
 * plain host addresses (as on the network) or {slot_id, host, url} objects (devnet).
 */
import { ChainError, type ChainEscrow, type EpochInfo, type EscrowParams, type EscrowSlot, type TxOutcome } from './port.js';

export interface RestOptions {
  restUrl: string;
  nodeBaseUrl: string;
  /** DEVSHARD_PUBLIC_API (the PoC gate's /v1/epochs/latest); the node base when unset. */
  publicApiUrl?: string;
  timeoutMs: number;
}

export const trimSlash = (u: string) => u.replace(/\/+$/, '');

export async function getJson(url: string, timeoutMs: number, allow404 = false): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json' } });
  } catch (e) {
    const timedOut = (e as Error).name === 'TimeoutError';
    throw new ChainError(timedOut ? 'timeout' : 'unreachable', `chain REST ${timedOut ? 'timed out' : 'unreachable'}: GET ${url}`);
  }
  if (res.status === 404 && allow404) return undefined;
  if (!res.ok) throw new ChainError(res.status >= 500 ? 'unreachable' : 'rejected', `chain REST answered ${res.status}: GET ${url}`);
  return res.json();
}

export const num = (v: unknown, name: string): number => {
  const n = Number(v ?? 0);
  if (!Number.isFinite(n)) throw new ChainError('rejected', `chain REST field ${name} is not a number`);
  return n;
};
export const big = (v: unknown): bigint => BigInt(String(v ?? '0'));
export type Obj = Record<string, unknown>;
export const obj = (v: unknown): Obj => (v !== null && typeof v === 'object' ? (v as Obj) : {});

export async function fetchParams(o: RestOptions): Promise<EscrowParams> {
  const body = obj(await getJson(`${trimSlash(o.restUrl)}/productscience/inference/inference/params`, o.timeoutMs));
  const p = obj(obj(body.params).devshard_escrow_params);
  return {
    minAmount: big(p.min_amount),
    maxEscrowsPerEpoch: num(p.max_escrows_per_epoch, 'max_escrows_per_epoch'),
    maxNonce: num(p.max_nonce, 'max_nonce'),
    allowedCreatorAddresses: Array.isArray(p.allowed_creator_addresses) ? p.allowed_creator_addresses.map(String) : [],
    tokenPrice: big(p.token_price),
  };
}

function parseSlot(raw: unknown, index: number): EscrowSlot {
  if (typeof raw === 'string') return { slotId: index, host: raw, url: '' };
  const s = obj(raw);
  return { slotId: num(s.slot_id ?? index, 'slot_id'), host: String(s.host ?? ''), url: String(s.url ?? '') };
}

export async function fetchEscrow(o: RestOptions, id: string): Promise<ChainEscrow | null> {
  if (!/^\d+$/.test(id)) return null;
  const body = obj(await getJson(`${trimSlash(o.restUrl)}/productscience/inference/inference/devshard_escrow/${id}`, o.timeoutMs, true));
  if (body.found === false || !body.escrow) return null;
  const e = obj(body.escrow);
  return {
    id: String(e.id),
    creator: String(e.creator ?? ''),
    amount: big(e.amount),
    settled: e.settled === true,
    epochIndex: num(e.epoch_index, 'epoch_index'),
    modelId: String(e.model_id ?? ''),
    slots: Array.isArray(e.slots) ? e.slots.map(parseSlot) : [],
  };
}

export async function fetchEpoch(o: RestOptions): Promise<EpochInfo> {
  const e = obj(await getJson(`${trimSlash(o.restUrl)}/productscience/inference/inference/epoch`, o.timeoutMs));
  return {
    height: num(e.height, 'height'),
    epochIndex: num(e.epoch_index, 'epoch_index'),
    nextBoundaryHeight: num(e.next_set_new_validators_height, 'next_set_new_validators_height'),
    blocksUntilBoundary: num(e.blocks_until_set_new_validators, 'blocks_until_set_new_validators'),
    pocActive: e.poc_active === true,
    pocEndHeight: num(e.poc_end_height, 'poc_end_height'),
  };
}

export async function fetchBalance(o: RestOptions, address: string, denom: string): Promise<bigint> {
  const body = obj(await getJson(`${trimSlash(o.restUrl)}/cosmos/bank/v1beta1/balances/${encodeURIComponent(address)}`, o.timeoutMs));
  const balances = Array.isArray(body.balances) ? body.balances.map(obj) : [];
  const coin = balances.find((b) => b.denom === denom);
  return coin ? big(coin.amount) : 0n;
}

export async function fetchModels(o: RestOptions): Promise<string[]> {
  const body = obj(await getJson(`${trimSlash(o.nodeBaseUrl)}/v1/governance/models`, o.timeoutMs));
  const list = Array.isArray(body.models) ? body.models : Array.isArray(body.data) ? body.data : [];
  return list.map((m) => String(obj(m).id ?? '')).filter((id) => id !== '');
}

/**
 * A transaction by hash from the Cosmos SDK REST (`/cosmos/tx/v1beta1/txs/{hash}`); null while
 * the chain does not know it (404, or a gRPC NotFound some gateways answer with 400).
 */
export async function fetchTx(o: { txQueryRestUrl: string; timeoutMs: number }, txHash: string): Promise<TxOutcome | null> {
  const hash = txHash.toUpperCase();
  let body: Obj;
  try {
    body = obj(await getJson(`${trimSlash(o.txQueryRestUrl)}/cosmos/tx/v1beta1/txs/${encodeURIComponent(hash)}`, o.timeoutMs, true));
  } catch (e) {
    if (e instanceof ChainError && e.kind === 'rejected' && / 400: /.test(e.message)) return null;
    throw e;
  }
  const r = obj(body.tx_response);
  if (String(r.txhash ?? '').toUpperCase() !== hash) return null;
  return txOutcomeOf(r, hash);
}

/** A `tx_response` (cosmos.base.abci.v1beta1.TxResponse in REST JSON) as the port's TxOutcome. */
export function txOutcomeOf(r: Obj, hash: string): TxOutcome {
  const events = Array.isArray(r.events) ? r.events.map(obj) : [];
  return {
    txHash: hash,
    height: num(r.height, 'height'),
    code: num(r.code, 'code'),
    codespace: String(r.codespace ?? ''),
    rawLog: String(r.raw_log ?? ''),
    events: events.map((e) => ({
      type: String(e.type ?? ''),
      attributes: (Array.isArray(e.attributes) ? e.attributes.map(obj) : []).map((a) => ({ key: String(a.key ?? ''), value: String(a.value ?? '') })),
    })),
  };
}
