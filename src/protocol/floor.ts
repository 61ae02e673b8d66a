/**
 * The v5 height floor F(m): the highest reference height the log established at nonces below m
 * (zpoken/gonka@86cff503 devshard/heightsync/floor.go `FloorIndex`). Only host-signed stamps raise
 * it (a user's Start or Heartbeat never does), nothing lowers it, and it is a function of the
 * applied log alone, so every replica computes the same floor and the same L0 verdicts.
 */
import { SEQUENCER_SIGNER, stampPresent } from './stamps.js';

/** Raises retained (one per increase, not per nonce); older ones are dropped. */
export const FLOOR_WINDOW = 4096;

/** One stamp in a diff and the identity that signed it (a slot id, or SEQUENCER_SIGNER). */
export interface FloorClaim {
  signer: number;
  height: bigint;
  hash: Uint8Array;
}

/** F(m), the block hash that set it, the signer that set it and the nonce it was set at. */
export interface FloorPoint {
  height: bigint;
  hash: Uint8Array;
  author: number;
  nonce: bigint;
  /** False only when m falls at or before a raise dropped from the window: then nothing is checked. */
  known: boolean;
}

interface Raise {
  nonce: bigint;
  height: bigint;
  hash: Uint8Array;
  author: number;
}

const NONE: Omit<FloorPoint, 'known'> = { height: 0n, hash: new Uint8Array(0), author: 0, nonce: 0n };

export class HeightFloor {
  /** Ascending nonce, each height above the one before. */
  private raises: Raise[] = [];
  private truncated = false;

  /**
   * Folds one applied diff's claims: the highest host-signed claim above the standing floor is
   * recorded at the diff's nonce. Claims with a zero height or no hash are not claims. Ties go to
   * the lowest signer (claims are ordered by signer, then height), whatever their order in the diff.
   */
  observe(nonce: bigint, claims: readonly FloorClaim[]): void {
    const best = this.raiseBy(nonce, claims);
    if (best) this.append(best);
  }

  /** As observe, but leaves this floor as it is: the same floor when nothing rises, else a raised copy. */
  observed(nonce: bigint, claims: readonly FloorClaim[]): HeightFloor {
    const best = this.raiseBy(nonce, claims);
    if (!best) return this;
    const next = this.clone();
    next.append(best);
    return next;
  }

  private raiseBy(nonce: bigint, claims: readonly FloorClaim[]): Raise | undefined {
    const present = claims
      .filter((c) => c.height !== 0n && stampPresent(c.hash) && c.signer !== SEQUENCER_SIGNER)
      .sort((a, b) => a.signer - b.signer || (a.height < b.height ? -1 : a.height > b.height ? 1 : 0));
    let best: Raise | undefined;
    const tip = this.top();
    for (const c of present) if (c.height > (best?.height ?? tip)) best = { nonce, height: c.height, hash: c.hash, author: c.signer };
    return best;
  }

  private top(): bigint {
    return this.raises.length === 0 ? 0n : this.raises[this.raises.length - 1]!.height;
  }

  private append(r: Raise): void {
    const last = this.raises[this.raises.length - 1];
    if (last && r.nonce <= last.nonce) {
      // The same nonce observed again: raise in place, keeping the nonce order the search needs.
      this.raises[this.raises.length - 1] = { ...r, nonce: last.nonce };
      return;
    }
    this.raises.push(r);
    if (this.raises.length > FLOOR_WINDOW) {
      this.raises.splice(0, this.raises.length - FLOOR_WINDOW);
      this.truncated = true;
    }
  }

  /** F(m): the last raise at a nonce strictly below m. */
  asOf(m: bigint): FloorPoint {
    let lo = 0;
    let hi = this.raises.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.raises[mid]!.nonce < m) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return { ...NONE, known: !this.truncated };
    return { ...this.raises[lo - 1]!, known: true };
  }

  /** The highest height in the index (0 before any raise). */
  max(): bigint {
    return this.top();
  }

  get size(): number {
    return this.raises.length;
  }

  /** A copy for a trial apply; raises are never changed in place after they are stored, so they are shared. */
  clone(): HeightFloor {
    const c = new HeightFloor();
    c.raises = [...this.raises];
    c.truncated = this.truncated;
    return c;
  }
}
