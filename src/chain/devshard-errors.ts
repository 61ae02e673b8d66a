/**
 * The devshard escrow failures the chain reports, in one place: the devnet raises them with these
 * texts and codes, the client maps a failed tx back to a ChainErrorKind.
 *
 * On the real chain (gonka 8a35022) the devshard keeper's own errors are plain `fmt.Errorf` texts:
 * the SDK reports them with codespace `undefined` and code 1, so they are matched **by text**
 * (k/msg_server_create_devshard_escrow.go, k/msg_server_settle_devshard_escrow.go,
 * k/devshard_settlement.go). The allowlist refusal is a **registered** error, codespace
 * `inference` code 1173 (t/errors.go ErrNotAllowedEscrowCreator), raised for create and settle.
 * Other registered codes of the module (1101–1112, …) mean other things (1103 participant not
 * found, 1112 current epoch group not found) and are never read as devshard failures.
 * Raw logs read like the SDK's: "failed to execute message; message index: 0: <text>".
 */
import type { ChainErrorKind } from './port.js';

export const INFERENCE_CODESPACE = 'inference';
/** Codespace and code the SDK gives an error no module registered (a plain fmt.Errorf). */
export const UNREGISTERED = { codespace: 'undefined', code: 1 } as const;

/** t/errors.go: the registered allowlist refusal. */
export const NOT_ALLOWED_ESCROW_CREATOR = {
  codespace: INFERENCE_CODESPACE,
  code: 1173,
  text: 'address is not allowed to create devshard escrows for devshards',
} as const;
/** t/errors.go: 1112, what GetEpochGroup answers for a model without an epoch group (wrapped). */
export const CURRENT_EPOCH_GROUP_NOT_FOUND = { codespace: INFERENCE_CODESPACE, code: 1112, text: 'current epoch group not found' } as const;

/** The keeper's texts, formatted as Go formats them (%q ≈ a JSON string for plain ASCII). */
export const DEVSHARD_TEXT = {
  modelRequired: () => 'model_id is required',
  amountOutOfRange: (amount: bigint, min: bigint, max: bigint) => `escrow amount ${amount} out of range [${min}, ${max}]`,
  epochLimit: (epoch: number, count: number, max: number) => `epoch ${epoch} already has ${count} escrows (max ${max})`,
  noEpochGroup: (model: string) => `failed to get epoch group for model ${JSON.stringify(model)}: ${CURRENT_EPOCH_GROUP_NOT_FOUND.text}`,
  notFound: (id: bigint | number) => `escrow ${id} not found`,
  alreadySettled: (id: bigint | number) => `escrow ${id} already settled`,
  wrongSettler: (settler: string, creator: string) => `settler ${settler} is not the escrow creator ${creator}`,
  versionRequired: () => 'version is required',
  nonceTooHigh: (nonce: bigint, max: number) => `nonce ${nonce} exceeds maximum ${max}`,
  versionTooLong: () => 'version exceeds maximum length of 128',
  /**
   * Chain v0.2.16 (k/devshard_settlement.go `validateDevshardSettlementVersionApproved`,
   * zpoken/gonka@ef1a5efd): the approved versions are a store of their own.
   */
  versionNotApproved: (version: string) => `settlement version ${JSON.stringify(version)} is not listed in approved devshard versions`,
  /** The same refusal before v0.2.16 (gonka 8a35022 .. 59b1ee7e), when the list was in params. */
  versionNotApprovedInParams: (version: string) => `settlement version ${JSON.stringify(version)} is not listed in devshard_escrow_params.approved_versions`,
  stateRootLength: (n: number) => `state_root must be 32 bytes, got ${n}`,
  stateRootMismatch: () => 'state_root mismatch',
  duplicateSignature: (slot: number) => `duplicate signature for slot ${slot}`,
  signatureSlotOutOfRange: (slot: number) => `slot_id ${slot} out of range`,
  recoverFailed: (slot: number, why: string) => `failed to recover address for slot ${slot}: ${why}`,
  signatureLength: (n: number) => `signature must be 65 bytes, got ${n}`,
  signatureRecovered: (slot: number, recovered: string, expected: string) => `signature for slot ${slot} recovered ${recovered}, expected ${expected}`,
  slotOutOfRangeForCount: (slot: number, count: number) => `slot ${slot} out of range for slot count ${count}`,
  missedExceeds: (slot: number, missed: number, assigned: bigint) => `slot ${slot} missed count ${missed} exceeds assigned per slot ${assigned}`,
  invalidExceeds: (slot: number, invalid: number, completed: bigint) => `slot ${slot} invalid count ${invalid} exceeds completed per slot ${completed}`,
  totalPayout: (payout: bigint, amount: bigint) => `total payout ${payout} exceeds escrow amount ${amount}`,
  insufficientQuorum: (votes: number, need: number) => `insufficient quorum: ${votes} slot votes, need ${need}`,
  duplicateHostStats: (slot: number) => `duplicate host_stats slot_id ${slot}`,
  hostStatsOutOfRange: (slot: number) => `host_stats slot_id ${slot} out of range`,
  totalDebit: (total: bigint, cost: bigint, fees: bigint, amount: bigint) => `total debit ${total} (cost ${cost} + fees ${fees}) exceeds escrow amount ${amount}`,
  wrongEpoch: (current: number, escrowEpoch: number) =>
    `devshard settlement only supports current or previous epoch: current epoch ${current}, escrow epoch ${escrowEpoch}`,
  lockFunds: (detail: string) => `failed to lock funds: ${detail}`,
} as const;

/** Text patterns of the keeper's plain errors → kind (first match wins). */
const TEXT_KINDS: [RegExp, ChainErrorKind][] = [
  [/address is not allowed to create devshard escrows/, 'not_allowlisted'],
  [/escrow amount \d+ out of range \[\d+, \d+\]/, 'amount_out_of_range'],
  [/epoch \d+ already has \d+ escrows \(max \d+\)/, 'epoch_limit'],
  [/escrow \d+ not found/, 'not_found'],
  [/escrow \d+ already settled/, 'already_settled'],
  [/settler \S+ is not the escrow creator/, 'wrong_settler'],
  [/nonce \d+ exceeds maximum \d+/, 'nonce_too_high'],
  // v0.2.16's text, then the older chains' (the list in params).
  [/settlement version .* is not listed in approved devshard versions/, 'version_not_approved'],
  [/settlement version .* is not listed in devshard_escrow_params\.approved_versions/, 'version_not_approved'],
  [/devshard settlement only supports current or previous epoch/, 'wrong_epoch'],
  [/insufficient quorum: \d+ slot votes, need \d+/, 'bad_signatures'],
  [/signature for slot \d+|failed to recover address for slot|duplicate signature for slot|state_root mismatch|state_root must be 32 bytes/, 'bad_signatures'],
  [/total debit \d+ \(cost \d+ \+ fees \d+\) exceeds escrow amount|total payout \d+ exceeds escrow amount/, 'overspent'],
];

/** Cosmos SDK codes (codespace "sdk") the devnet uses exactly as a node does. */
export const SDK_CODES = {
  txDecode: 2,
  unauthorized: 4,
  insufficientFunds: 5,
  unknownRequest: 6,
  invalidAddress: 7,
  outOfGas: 11,
  insufficientFee: 13,
  invalidPubKey: 8,
  unknownAddress: 9,
  invalidRequest: 18,
  txInMempoolCache: 19,
  wrongSequence: 32,
  notFound: 22,
} as const;

/** Maps a failed tx or CheckTx answer to the gateway's error kind. */
export function kindOfFailure(code: number, codespace: string, rawLog: string): ChainErrorKind {
  if (codespace === INFERENCE_CODESPACE && code === NOT_ALLOWED_ESCROW_CREATOR.code) return 'not_allowlisted';
  if (codespace === 'sdk') {
    if (code === SDK_CODES.insufficientFunds) return 'insufficient_funds';
    if (code === SDK_CODES.wrongSequence) return 'bad_sequence';
  }
  const log = rawLog.toLowerCase();
  // A signed unordered tx that reached the node after its timeout_timestamp: stale like a used
  // sequence, so the caller signs a new one (x/auth/ante unordered checks).
  if (log.includes('timeout_timestamp that has already passed')) return 'bad_sequence';
  for (const [pattern, kind] of TEXT_KINDS) if (pattern.test(rawLog)) return kind;
  if (log.includes('insufficient funds')) return 'insufficient_funds';
  if (log.includes('incorrect account sequence')) return 'bad_sequence';
  return 'rejected';
}
