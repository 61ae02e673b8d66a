/**
 * Which slots a host heard a fresh height claim from (Z5 heightsync/peerseen.go `PeerSeen`): the
 * `peer_seen` bitmap of its acks. Its own file so the host session holds one without importing the
 * ack builder (which reads the session).
 */

/** F: how long a slot's height claim stays in peer_seen (DefaultOriginatorFreshness). */
export const PEER_SEEN_FRESH_MS = 60_000;

/** `PeerSeen`: the slots this host holds a fresh height claim from (acks it applied, its own tip). */
export class PeerSeen {
  private readonly tips = new Map<number, { height: bigint; at: number }>();
  constructor(private readonly slots: number) {}

  markFresh(slot: number, height: bigint, atMs: number): void {
    if (slot >= Math.max(this.slots, 1)) return;
    this.tips.set(slot, { height, at: atMs });
  }

  /** ceil(slots / 8) bytes, bit j = slot j; claims older than F are dropped. */
  bytes(nowMs: number): Uint8Array {
    const out = new Uint8Array(Math.ceil(Math.max(this.slots, 1) / 8));
    for (const [slot, tip] of [...this.tips]) {
      if (nowMs - tip.at > PEER_SEEN_FRESH_MS) {
        this.tips.delete(slot);
        continue;
      }
      out[slot >> 3]! |= 1 << (slot & 7);
    }
    return out;
  }
}
