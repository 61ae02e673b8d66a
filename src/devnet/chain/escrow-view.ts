/** An escrow as the simulated hosts read it from the devnet chain (DevnetChainView.escrow). */
import type { DevnetEscrowView } from '../hosts/chain-view.js';
import type { EscrowState } from './state.js';

export function escrowView(e: EscrowState): DevnetEscrowView {
  return {
    id: String(e.id),
    creator: e.creator,
    modelId: e.modelId,
    settled: e.settled,
    epochIndex: e.epochIndex,
    slots: e.slots,
    // What a real host binds its session to: the deposit and the values frozen on the escrow.
    amount: e.amount,
    session: {
      ...(e.tokenPrice !== undefined ? { tokenPrice: e.tokenPrice } : {}),
      ...(e.createDevshardFee !== undefined ? { createDevshardFee: e.createDevshardFee } : {}),
      ...(e.feePerNonce !== undefined ? { feePerNonce: e.feePerNonce } : {}),
      ...(e.inferenceSealGraceNonces !== undefined ? { inferenceSealGraceNonces: e.inferenceSealGraceNonces } : {}),
      ...(e.inferenceSealGraceSeconds !== undefined ? { inferenceSealGraceSeconds: e.inferenceSealGraceSeconds } : {}),
      ...(e.autoSealEveryNNonces !== undefined ? { autoSealEveryNNonces: e.autoSealEveryNNonces } : {}),
    },
    // The chain params frozen at create win over live ones at bind (session-config.ts bindParamsAtBind).
    ...(e.validationRate !== undefined || e.voteThresholdFactor !== undefined || e.refusalTimeout !== undefined || e.executionTimeout !== undefined
      ? { frozen: { validationRate: e.validationRate ?? 0, voteThresholdFactor: e.voteThresholdFactor ?? 0, refusalTimeout: e.refusalTimeout ?? 0n, executionTimeout: e.executionTimeout ?? 0n } }
      : {}),
  };
}
