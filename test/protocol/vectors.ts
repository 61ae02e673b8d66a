/**
 * Loads the golden vectors: test/fixtures/devshard-vectors (produced by gonka 8a35022 devshard/state)
 * and its v5/ (produced by zpoken/gonka@86cff503's v5 apply path).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromBinary } from '@bufbuild/protobuf';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import type { SessionConfig } from '../../src/protocol/session-config.js';
import type { ReplicaParams, WarmKeyResolver } from '../../src/protocol/replica.js';

export const VECTOR_DIR = join(import.meta.dirname, '..', 'fixtures', 'devshard-vectors');
export const VECTOR_DIR_V5 = join(VECTOR_DIR, 'v5');

/** v5's height-sync state as the vectors write it (the first seven are hashed). */
export interface VectorHeightSync {
  forced_start: number;
  forced_end: number;
  cadence_swallow_until: number;
  swallow_fe: number;
  turn_k: number;
  turn_slots: number;
  reason: string;
  last_completed_height: number;
  latest_turn_start: number;
}

export interface VectorState {
  state_root: string;
  phase: number;
  latest_nonce: number;
  finalize_nonce: number;
  balance: number;
  fees: number;
  rest_hash: string;
  host_stats_hash: string;
  sealed_acc: string;
  warm_keys: Record<string, string>;
  host_stats: Array<{ slot: number; missed: number; invalid: number; cost: number; required_validations: number; completed_validations: number }>;
  live: Array<{
    id: number;
    status: string;
    executor_slot: number;
    reserved_cost: number;
    actual_cost: number;
    confirmed_at: number;
    votes_valid: number;
    votes_invalid: number;
    validated_by: string;
    /** v5 only. */
    started_at_height?: number;
    confirmed_at_height?: number;
  }>;
  sealed_now: number[];
  /** v5 only. */
  height_sync?: VectorHeightSync;
}

export interface VectorStep {
  nonce: number;
  note: string;
  txs: Array<{ kind: string; b64: string }>;
  user_sig: string;
  post_state_root: string;
  rejected: boolean;
  error?: string;
  error_code?: string;
  user_error?: string | null;
  after: VectorState;
}

export interface VectorFile {
  name: string;
  escrow_id: string;
  version: string;
  slots: string[];
  user_address: string;
  amount: number;
  config_input: Record<string, number>;
  config: Record<string, number>;
  warm_key_authorized: Array<{ warm: string; cold: string }>;
  keys: Array<{ label: string; priv_hex: string; address: string }>;
  initial: VectorState;
  steps: VectorStep[];
  settlement: {
    escrow_id: string;
    state_root_and_protocol_version: string;
    nonce: number;
    fees: number;
    rest_hash: string;
    host_stats: VectorState['host_stats'];
    host_stats_hash: string;
    state_root: string;
    signatures: Record<string, string>;
    verify_settlement_ok: boolean;
  };
}

export const loadVectors = (dir: string = VECTOR_DIR): VectorFile[] =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as VectorFile);

export const configOf = (c: Record<string, number>): SessionConfig => ({
  refusalTimeout: BigInt(c.refusal_timeout!),
  executionTimeout: BigInt(c.execution_timeout!),
  tokenPrice: BigInt(c.token_price!),
  createDevshardFee: BigInt(c.create_devshard_fee!),
  feePerNonce: BigInt(c.fee_per_nonce!),
  voteThreshold: c.vote_threshold!,
  validationRate: c.validation_rate!,
  inferenceSealGraceNonces: c.inference_seal_grace_nonces!,
  inferenceSealGraceSeconds: c.inference_seal_grace_seconds!,
  autoSealEveryNNonces: c.auto_seal_every_n_nonces!,
});

export const paramsOf = (v: VectorFile): ReplicaParams => ({
  escrowId: v.escrow_id,
  slots: v.slots,
  amount: BigInt(v.amount),
  userAddress: v.user_address,
  config: configOf(v.config_input),
  version: v.version,
  ...(v.version === 'v5' ? { rules: 'v5' as const } : {}),
});

export const resolverOf = (v: VectorFile): WarmKeyResolver => (warm, cold) => v.warm_key_authorized.some((a) => a.warm === warm && a.cold === cold);

export const txsOf = (s: VectorStep): DevshardTx[] => s.txs.map((t) => fromBinary(DevshardTxSchema, Buffer.from(t.b64, 'base64')));
