/**
 * REST reads of the chain (NODE_CHAIN_API) and the node (NODE_BASE), parsed into the port's types.
 * Tolerant of cosmos-style encodings: integers may come as strings or numbers; escrow slots may be
 * plain host addresses (as on the network) or {slot_id, host, url} objects (devnet).
 */
import type { ChainBindParams } from '../protocol/session-config.js';
import { ChainError, type ChainEscrow, type EpochInfo, type EscrowParams, type TxOutcome } from './port.js';

export interface RestOptions {
  restUrl: string;
  nodeBaseUrl: string;
  /** DEVSHARD_PUBLIC_API (the PoC gate's /v1/epochs/latest); the node base when unset. */
  publicApiUrl?: string;
  timeoutMs: number;
}

export const trimSlash = (u: string) => u.replace(/\/+$/, '');

/** `absent`: true = a 404 answers undefined; or the statuses that do (a route an older chain lacks). */
export async function getJson(url: string, timeoutMs: number, absent: boolean | readonly number[] = false): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json' } });
  } catch (e) {
    const timedOut = (e as Error).name === 'TimeoutError';
    throw new ChainError(timedOut ? 'timeout' : 'unreachable', `chain REST ${timedOut ? 'timed out' : 'unreachable'}: GET ${url}`);
  }
  if ((absent === true && res.status === 404) || (Array.isArray(absent) && absent.includes(res.status))) return undefined;
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

const PARAMS_PATH = '/productscience/inference/inference/params';
export const APPROVED_VERSIONS_PATH = '/productscience/inference/inference/devshard_approved_versions';

/**
 * `params.devshard_escrow_params` (params.proto; 64-bit ints arrive as strings, 32-bit as numbers),
 * with the approved versions from their own store when the chain has one (v0.2.16+, where the
 * params' list is migrated out and empty), else from the params' `approved_versions`.
 */
export async function fetchParams(o: RestOptions): Promise<EscrowParams> {
  const [body, approved] = await Promise.all([getJson(`${trimSlash(o.restUrl)}${PARAMS_PATH}`, o.timeoutMs), fetchApprovedVersions(o)]);
  const params = parseEscrowParams(obj(obj(obj(body).params).devshard_escrow_params));
  return approved === undefined ? params : { ...params, approvedVersions: approved };
}

/**
 * The approved devshard versions' names, from `Query/DevshardApprovedVersions` (chain v0.2.16,
 * zpoken/gonka@ef1a5efd query.proto: `{repeated DevshardApprovedVersion versions = 1}`, each
 * `{name, binary, sha256}`; the keeper lists them by name). Undefined when the chain does not serve
 * the route: 404 (no such path) or 501 (gRPC Unimplemented), i.e. a chain before v0.2.16.
 */
export async function fetchApprovedVersions(o: RestOptions): Promise<string[] | undefined> {
  const body = await getJson(`${trimSlash(o.restUrl)}${APPROVED_VERSIONS_PATH}`, o.timeoutMs, [404, 501]);
  if (body === undefined) return undefined;
  return approvedNames(obj(body).versions);
}

const approvedNames = (list: unknown): string[] =>
  Array.isArray(list) ? list.map((v) => String(obj(v).name ?? '')).filter((n) => n !== '') : [];

export function parseEscrowParams(p: Obj): EscrowParams {
  return {
    minAmount: big(p.min_amount),
    maxAmount: big(p.max_amount),
    maxEscrowsPerEpoch: num(p.max_escrows_per_epoch, 'max_escrows_per_epoch'),
    groupSize: num(p.group_size, 'group_size'),
    maxNonce: num(p.max_nonce, 'max_nonce'),
    allowedCreatorAddresses: Array.isArray(p.allowed_creator_addresses) ? p.allowed_creator_addresses.map(String) : [],
    tokenPrice: big(p.token_price),
    approvedVersions: approvedNames(p.approved_versions),
    createDevshardFee: big(p.create_devshard_fee),
    feePerNonce: big(p.fee_per_nonce),
    bind: {
      refusalTimeout: big(p.refusal_timeout),
      executionTimeout: big(p.execution_timeout),
      validationRate: optNum(p.validation_rate),
      voteThresholdFactor: optNum(p.vote_threshold_factor),
    },
  };
}

/**
 * `devshard_escrow/{id}` → `{escrow, found}` (an unknown id is 200 with found false). Slots are plain
 * addresses, one address may hold several; `urlOf` resolves each address to its participant's
 * inference_url ('' = none: the slot is unavailable).
 */
export async function fetchEscrow(o: RestOptions, id: string, urlOf: (address: string) => Promise<string>): Promise<ChainEscrow | null> {
  if (!/^\d+$/.test(id)) return null;
  const body = obj(await getJson(`${trimSlash(o.restUrl)}/productscience/inference/inference/devshard_escrow/${id}`, o.timeoutMs, true));
  if (body.found !== true || !body.escrow) return null;
  const e = obj(body.escrow);
  const addresses = Array.isArray(e.slots) ? e.slots.map((s) => String(s)) : [];
  const urls = new Map<string, string>();
  for (const a of new Set(addresses)) urls.set(a, await urlOf(a));
  return {
    id: String(e.id),
    creator: String(e.creator ?? ''),
    amount: big(e.amount),
    settled: e.settled === true,
    epochIndex: num(e.epoch_index, 'epoch_index'),
    modelId: String(e.model_id ?? ''),
    slots: addresses.map((host, slotId) => ({ slotId, host, url: urls.get(host) ?? '' })),
    session: {
      tokenPrice: big(e.token_price),
      createDevshardFee: big(e.create_devshard_fee),
      feePerNonce: big(e.fee_per_nonce),
      inferenceSealGraceNonces: optNum(e.inference_seal_grace_nonces),
      inferenceSealGraceSeconds: optNum(e.inference_seal_grace_seconds),
      autoSealEveryNNonces: optNum(e.auto_seal_every_n_nonces),
    },
    ...frozenBindParams(e),
  };
}

/**
 * DevshardEscrow 15–18, the chain params frozen at creation (devshard_escrow.proto: validation_rate
 * 15 and vote_threshold_factor 16 uint32, refusal_timeout 17 and execution_timeout 18 int64, so
 * strings in REST JSON). The chain's gateway emits defaults, so a member is absent only when the
 * chain does not know the field; it is left out then, and `frozen` too when none is served.
 */
function frozenBindParams(e: Obj): { frozen?: ChainBindParams } {
  const has = (k: string) => e[k] !== undefined && e[k] !== null;
  const frozen: ChainBindParams = {
    ...(has('validation_rate') ? { validationRate: num(e.validation_rate, 'validation_rate') } : {}),
    ...(has('vote_threshold_factor') ? { voteThresholdFactor: num(e.vote_threshold_factor, 'vote_threshold_factor') } : {}),
    ...(has('refusal_timeout') ? { refusalTimeout: big(e.refusal_timeout) } : {}),
    ...(has('execution_timeout') ? { executionTimeout: big(e.execution_timeout) } : {}),
  };
  return Object.keys(frozen).length > 0 ? { frozen } : {};
}

/** A 32-bit field that proto3 JSON may leave out when 0. */
const optNum = (v: unknown): number => (v === undefined || v === null ? 0 : Number(v));

/** `participant/{address}` → participant.inference_url; '' for an unknown participant or one without URL. */
export async function fetchParticipantUrl(o: RestOptions, address: string): Promise<string> {
  const body = await getJson(`${trimSlash(o.restUrl)}/productscience/inference/inference/participant/${encodeURIComponent(address)}`, o.timeoutMs, true);
  if (body === undefined) return '';
  return String(obj(obj(body).participant).inference_url ?? '').trim();
}

const POC_PHASES = new Set(['PoCGenerate', 'PoCGenerateWindDown', 'PoCValidate', 'PoCValidateWindDown']);
/** ConfirmationPoCPhase by number (devshardctl phase_gate.go confirmationPoCPhaseValue.UnmarshalJSON). */
const CONFIRMATION_POC_NAMES = ['CONFIRMATION_POC_INACTIVE', 'CONFIRMATION_POC_GRACE_PERIOD', 'CONFIRMATION_POC_GENERATION', 'CONFIRMATION_POC_VALIDATION', 'CONFIRMATION_POC_COMPLETED'];
const confirmationPhase = (v: unknown): string | undefined => {
  if (typeof v === 'number' && Number.isInteger(v)) return CONFIRMATION_POC_NAMES[v] ?? String(v);
  const s = typeof v === 'string' ? v.trim() : '';
  return s === '' ? undefined : s;
};
const CONFIRMATION_POC_BLOCKING = new Set(['CONFIRMATION_POC_GRACE_PERIOD', 'CONFIRMATION_POC_GENERATION', 'CONFIRMATION_POC_VALIDATION']);

/**
 * The epoch from the public API's `/v1/epochs/latest` (decentralized-api get_epoch.go), read as
 * devshardctl's PoC gate reads it (ctl/phase_gate.go): the epoch switch is epoch_stages.set_new_validators
 * when not yet passed, else next_epoch_stages'; PoC is active in the PoC phases or a blocking
 * confirmation PoC.
 */
export async function fetchEpoch(o: RestOptions): Promise<EpochInfo> {
  const e = obj(await getJson(`${trimSlash(o.publicApiUrl ?? o.nodeBaseUrl)}/v1/epochs/latest`, o.timeoutMs));
  return parseEpoch(e);
}

export function parseEpoch(e: Obj): EpochInfo {
  const height = num(e.block_height, 'block_height');
  const latest = obj(e.latest_epoch);
  const stages = obj(e.epoch_stages);
  const next = obj(e.next_epoch_stages);
  const svn = num(stages.set_new_validators, 'set_new_validators');
  const nextSvn = num(next.set_new_validators, 'set_new_validators');
  const boundary = svn > 0 && svn >= height ? svn : nextSvn > 0 ? nextSvn : num(stages.next_poc_start, 'next_poc_start');
  const phase = String(e.phase ?? '');
  const confirmation = confirmationPhase(obj(e.active_confirmation_poc_event).phase);
  const pocActive = POC_PHASES.has(phase) || (confirmation !== undefined && CONFIRMATION_POC_BLOCKING.has(confirmation));
  const pocEnd = num(stages.poc_validation_end, 'poc_validation_end');
  // One epoch's length: from this epoch's PoC start to the next one's (t/epoch_stages.go).
  const epochLength = num(stages.next_poc_start, 'next_poc_start') - num(stages.poc_start, 'poc_start');
  return {
    height,
    epochIndex: num(latest.index, 'latest_epoch.index'),
    pocStartHeight: num(latest.poc_start_block_height, 'poc_start_block_height'),
    phase,
    ...(confirmation !== undefined ? { confirmationPocPhase: confirmation } : {}),
    nextBoundaryHeight: boundary,
    blocksUntilBoundary: Math.max(0, boundary - height),
    pocActive,
    pocEndHeight: pocActive || pocEnd > height ? pocEnd : num(next.poc_validation_end, 'poc_validation_end'),
    ...(epochLength > 0 ? { epochLength } : {}),
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
