/**
 * A session's hosts and what each holds (session.ts): each host (by inference URL: one address
 * holding two slots is one host) is sent the diffs above the nonce it last acknowledged with a
 * receipt; a diff is kept, with our root after it, until every host acknowledged it.
 */
import type { SentDiff } from './session-types.js';
import type { SignedDiff } from './request-body.js';

export class SessionHosts {
  /** Diffs not yet acknowledged by every host, ascending. */
  private readonly unacked: SentDiff[] = [];
  /** Root after each nonce still in `unacked` (a receipt is checked against it). */
  private readonly roots = new Map<bigint, Uint8Array>();
  /** Inference URL → the latest nonce that host acknowledged. */
  private readonly acked = new Map<string, bigint>();
  /** Slot id → the URL its host is called at: the escrow's, until the host moved (moveHost). */
  private readonly slotUrls: string[];
  /** The distinct URLs of slotUrls, in slot order. */
  private hostUrls: string[];

  constructor(private readonly slots: readonly { host: string; url: string }[]) {
    this.slotUrls = slots.map((s) => s.url);
    this.hostUrls = [...new Set(this.slotUrls)];
  }

  /** Keeps a diff composed (or recorded by an earlier run) until every host acknowledged it. */
  keep(d: SentDiff): void {
    this.unacked.push(d);
    this.roots.set(d.nonce, d.postStateRoot);
  }

  /** The executor of a nonce: slots[nonce % n]. */
  executorUrl(nonce: bigint): string {
    return this.slotUrls[Number(nonce % BigInt(this.slotUrls.length))]!;
  }

  /** See DevshardSession.moveHost. */
  moveHost(address: string, url: string): boolean {
    const from = new Set<string>();
    this.slots.forEach((slot, i) => {
      if (slot.host !== address || this.slotUrls[i] === url) return;
      from.add(this.slotUrls[i]!);
      this.slotUrls[i] = url;
    });
    if (from.size === 0) return false;
    let acked = this.hostUrls.includes(url) ? (this.acked.get(url) ?? 0n) : undefined;
    for (const old of from) {
      const a = this.acked.get(old) ?? 0n;
      if (acked === undefined || a < acked) acked = a;
      // Another address still called there keeps it (and its acknowledged nonce).
      if (!this.slotUrls.includes(old)) this.acked.delete(old);
    }
    if (acked !== undefined && acked > 0n) this.acked.set(url, acked);
    else this.acked.delete(url);
    this.hostUrls = [...new Set(this.slotUrls)];
    return true;
  }

  /** Our root after `nonce`, while some host has not acknowledged it. */
  rootAt(nonce: bigint): Uint8Array | undefined {
    return this.roots.get(nonce);
  }

  /** The latest nonce host `url` acknowledged with a receipt (0: none yet). */
  ackedNonce(url: string): bigint {
    return this.acked.get(url) ?? 0n;
  }

  /** Host `url` acknowledged `nonce`: answers whether its acknowledged nonce moved. */
  acknowledge(url: string, nonce: bigint): boolean {
    if ((this.acked.get(url) ?? 0n) >= nonce) return false;
    this.acked.set(url, nonce);
    return true;
  }

  /** How many diffs host `url` has not acknowledged (without building the list). */
  catchUpCount(url: string): number {
    const from = this.acked.get(url) ?? 0n;
    let n = 0;
    for (let i = this.unacked.length - 1; i >= 0 && this.unacked[i]!.nonce > from; i--) n++;
    return n;
  }

  /** The diffs host `url` has not acknowledged. */
  catchUp(url: string): SignedDiff[] {
    const from = this.acked.get(url) ?? 0n;
    const out: SignedDiff[] = [];
    // The kept diffs themselves (never changed once signed), so their JSON is made once (request-body.ts).
    for (const d of this.unacked) if (d.nonce > from) out.push(d);
    return out;
  }

  /** The hosts' URLs (distinct), in slot order, as they are called now (moveHost). */
  hosts(): readonly string[] {
    return this.hostUrls;
  }

  /** Drops the diffs every host has acknowledged. */
  prune(): void {
    let min: bigint | undefined;
    for (const url of this.hostUrls) {
      const a = this.acked.get(url) ?? 0n;
      if (min === undefined || a < min) min = a;
    }
    let drop = 0;
    while (drop < this.unacked.length && this.unacked[drop]!.nonce <= (min ?? 0n)) this.roots.delete(this.unacked[drop++]!.nonce);
    if (drop > 0) this.unacked.splice(0, drop);
  }
}
