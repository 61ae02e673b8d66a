/**
 * The settlement of a session (gonka 8a35022 devshard/state/settlement.go `BuildSettlement`,
 * `VerifySettlement`; inference-chain x/inference/module/commands.go `settlementFileJSON`, the file
 * `inferenced tx inference settle-devshard-escrow` reads; real-network.md §4).
 */
import type { HostStats } from './hashes.js';
import { stateSignatureBytes } from './preimages.js';
import type { Replica } from './replica.js';
import { recoverAddress } from './signatures.js';

export interface Settlement {
  escrowId: string;
  /** The state-root tag the session was created with ("v2"). */
  version: string;
  nonce: bigint;
  fees: bigint;
  restHash: Uint8Array;
  hostStats: Array<{ slotId: number } & HostStats>;
  /** sha256(host_stats_hash ‖ fees ‖ rest_hash ‖ sha256(version) ‖ 0x02): what the hosts sign. */
  stateRoot: Uint8Array;
}

/**
 * `BuildSettlement` of the replica's current state. `nonce` is the nonce the hosts signed at
 * (the latest by default; Settlement is reached at FinalizeNonce + N and never changes after).
 */
export function buildSettlement(replica: Replica, nonce: bigint = replica.latestNonce): Settlement {
  return {
    escrowId: replica.escrowId,
    version: replica.version,
    nonce,
    fees: replica.fees,
    restHash: replica.restHash(),
    hostStats: replica.hostStats(),
    stateRoot: replica.settlementRoot(),
  };
}

/** The bytes a host signs to approve the settlement: StateSignatureContent{root, escrow id, nonce}. */
export const settlementSignedBytes = (s: Settlement): Uint8Array => stateSignatureBytes(s.stateRoot, s.escrowId, s.nonce);

/**
 * Whether a slot's signature recovers to the slot's address or its warm key
 * (`VerifySettlement`; the keeper accepts warm keys through an authz grant).
 */
export function settlementSignatureValid(s: Settlement, slotAddress: string, signature: Uint8Array, warm?: string): boolean {
  try {
    const signer = recoverAddress(settlementSignedBytes(s), signature);
    return signer === slotAddress || (warm !== undefined && signer === warm);
  } catch {
    return false;
  }
}

const b64 = (b: Uint8Array): string => Buffer.from(b).toString('base64');

/**
 * The settlement file as JSON text: `escrow_id` a decimal string, 64-bit numbers as exact JSON
 * integer literals (never rounded through a double), byte fields std base64.
 */
export function settlementFileJson(s: Settlement, signatures: ReadonlyArray<{ slotId: number; signature: Uint8Array }>): string {
  const stats = s.hostStats
    .map(
      (h) =>
        `    {"slot_id": ${h.slotId}, "missed": ${h.missed}, "invalid": ${h.invalid}, "cost": ${h.cost}, "required_validations": ${h.requiredValidations}, "completed_validations": ${h.completedValidations}}`,
    )
    .join(',\n');
  const sigs = [...signatures]
    .sort((a, b) => a.slotId - b.slotId)
    .map((x) => `    {"slot_id": ${x.slotId}, "signature": ${JSON.stringify(b64(x.signature))}}`)
    .join(',\n');
  return [
    '{',
    `  "escrow_id": ${JSON.stringify(s.escrowId)},`,
    `  "version": ${JSON.stringify(s.version)},`,
    `  "state_root": ${JSON.stringify(b64(s.stateRoot))},`,
    `  "nonce": ${s.nonce},`,
    `  "fees": ${s.fees},`,
    `  "rest_hash": ${JSON.stringify(b64(s.restHash))},`,
    `  "host_stats": [\n${stats}\n  ],`,
    `  "signatures": [\n${sigs}\n  ]`,
    '}',
    '',
  ].join('\n');
}
