/**
 * The devshard escrow failures the chain reports, in one place: the devnet raises them with these
 * codes and reason texts, the client maps a failed tx (code + codespace, else raw-log text) back to
 * a ChainErrorKind. Raw logs read like the SDK's: "failed to execute message; message index: 0:
 * <detail>: <reason>".
 */
import type { ChainErrorKind } from './port.js';

export const INFERENCE_CODESPACE = 'inference';

export interface DevshardFailure {
  kind: ChainErrorKind;
  code: number;
  /** Short reason that ends every raw log of this failure (the SDK's wrapped error text). */
  reason: string;
}

export const DEVSHARD_FAILURES = {
  notAllowlisted: { kind: 'not_allowlisted', code: 1101, reason: 'creator not allowlisted' },
  belowMinAmount: { kind: 'below_min_amount', code: 1102, reason: 'amount below min_amount' },
  epochLimit: { kind: 'epoch_limit', code: 1103, reason: 'max escrows per epoch reached' },
  notFound: { kind: 'not_found', code: 1104, reason: 'escrow not found' },
  alreadySettled: { kind: 'already_settled', code: 1105, reason: 'escrow already settled' },
  wrongSettler: { kind: 'wrong_settler', code: 1106, reason: 'settler is not the escrow creator' },
  wrongEpoch: { kind: 'wrong_epoch', code: 1107, reason: 'settlement outside the escrow epoch window' },
  nonceTooHigh: { kind: 'nonce_too_high', code: 1108, reason: 'nonce exceeds max_nonce' },
  badSignatures: { kind: 'bad_signatures', code: 1109, reason: 'insufficient valid host signatures' },
  overspent: { kind: 'overspent', code: 1110, reason: 'host costs plus fees exceed escrow amount' },
  unknownModel: { kind: 'rejected', code: 1111, reason: 'unknown model' },
  invalidRequest: { kind: 'rejected', code: 1112, reason: 'invalid request' },
} as const satisfies Record<string, DevshardFailure>;

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
  if (codespace === INFERENCE_CODESPACE) {
    for (const f of Object.values(DEVSHARD_FAILURES) as DevshardFailure[]) if (f.code === code) return f.kind;
  }
  if (codespace === 'sdk' || codespace === '') {
    if (code === SDK_CODES.insufficientFunds) return 'insufficient_funds';
    if (code === SDK_CODES.wrongSequence) return 'bad_sequence';
  }
  // Another chain build may number its errors differently: fall back to the reason text.
  const log = rawLog.toLowerCase();
  // A signed unordered tx that reached the node after its timeout_timestamp: stale like a used
  // sequence, so the caller signs a new one (x/auth/ante unordered checks).
  if (log.includes('timeout_timestamp that has already passed')) return 'bad_sequence';
  for (const f of Object.values(DEVSHARD_FAILURES) as DevshardFailure[]) if (log.includes(f.reason)) return f.kind;
  if (log.includes('insufficient funds')) return 'insufficient_funds';
  if (log.includes('incorrect account sequence')) return 'bad_sequence';
  if (log.includes('allowlist') || log.includes('not allowed')) return 'not_allowlisted';
  return 'rejected';
}
