/**
 * The replica's `liveHash` (replica.ts), kept incrementally: the sha256 state every LIVE_HASH_MARK
 * entries, so that only the entries changed since the last call are hashed again.
 */
import { createHash, type Hash } from 'node:crypto';
import { varint } from './bytes.js';
import { inferenceEntry } from './inference-record.js';
import type { SessionState } from './session-state.js';

const LIVE_HASH_MARK = 32;
const LIVE_TAG = Uint8Array.of(0x0a);

export class LiveHash {
  private cache: { ids: bigint[]; marks: { n: number; hash: Hash }[]; digest: Uint8Array } | undefined;

  /**
   * `liveHash` over the live entries, incrementally: the sha256 state is kept every
   * LIVE_HASH_MARK entries, and only the entries from the lowest id changed since the last call
   * are hashed again (in a session they are the recent ones; a seal removes the oldest, and the
   * next call hashes everything once).
   */
  of(state: SessionState): Uint8Array {
    const dirty = state.takeDirty();
    let c = this.cache;
    if (c !== undefined && dirty === undefined) return c.digest;
    if (c === undefined) c = this.cache = { ids: [], marks: [{ n: 0, hash: createHash('sha256') }], digest: new Uint8Array(0) };
    const { ids, marks } = c;
    let keep = ids.length;
    if (dirty !== undefined) {
      // The first cached id >= dirty.
      let lo = 0;
      let hi = ids.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (ids[mid]! < dirty) lo = mid + 1;
        else hi = mid;
      }
      keep = lo;
    }
    while (marks[marks.length - 1]!.n > keep) marks.pop();
    const mark = marks[marks.length - 1]!;
    ids.length = mark.n;
    const h = mark.hash.copy();
    const parts: Uint8Array[] = [];
    for (const r of state.liveAfter(mark.n > 0 ? ids[mark.n - 1]! : -1n)) {
      const e = inferenceEntry(r);
      parts.push(LIVE_TAG, varint(e.length), e);
      ids.push(r.id);
      if (ids.length % LIVE_HASH_MARK === 0) {
        h.update(Buffer.concat(parts));
        parts.length = 0;
        marks.push({ n: ids.length, hash: h.copy() });
      }
    }
    if (parts.length > 0) h.update(Buffer.concat(parts));
    c.digest = new Uint8Array(h.digest());
    return c.digest;
  }
}
