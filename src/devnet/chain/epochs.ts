/**
 * Epoch arithmetic of the devnet. Epoch i covers heights [i*E, (i+1)*E); the set_new_validators
 * boundary at (i+1)*E starts epoch i+1 and opens a PoC window of P blocks: [(i+1)*E, (i+1)*E + P).
 * Heights start at 1, so the chain starts in epoch 0, with no PoC window before the first boundary.
 */
export interface EpochPosition {
  height: number;
  epochIndex: number;
  epochStartHeight: number;
  nextBoundaryHeight: number;
  blocksUntilBoundary: number;
  pocActive: boolean;
  /** Start of the current PoC window when active, else of the next one. */
  pocStartHeight: number;
  pocEndHeight: number;
}

export function epochAt(height: number, epochBlocks: number, pocBlocks: number): EpochPosition {
  const epochIndex = Math.floor(height / epochBlocks);
  const epochStartHeight = epochIndex * epochBlocks;
  const nextBoundaryHeight = epochStartHeight + epochBlocks;
  const pocActive = epochIndex >= 1 && height < epochStartHeight + pocBlocks;
  const pocStartHeight = pocActive ? epochStartHeight : nextBoundaryHeight;
  return {
    height,
    epochIndex,
    epochStartHeight: Math.max(epochStartHeight, 1),
    nextBoundaryHeight,
    blocksUntilBoundary: nextBoundaryHeight - height,
    pocActive,
    pocStartHeight,
    pocEndHeight: pocStartHeight + pocBlocks,
  };
}
