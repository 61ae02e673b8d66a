/**
 * Small byte strings kept for a long time (a live inference's prompt and response hashes: a
 * record stays live for `inference_seal_grace_seconds`, an hour on the chain) copied into shared
 * slabs. A decoded field is a view of the whole message it came in, which it would keep alive, and
 * an array of its own costs an ArrayBuffer and a backing store (~250 bytes and GC work) for 32
 * bytes. The copies are never written to (records are replaced, not edited).
 */
const SLAB_BYTES = 64 * 1024;
/** Longer byte strings get an array of their own. */
const MAX_KEPT = 256;

let slab = new Uint8Array(SLAB_BYTES);
let used = 0;

/** Zero bytes, shared (a zero-length view cannot be written). */
export const NO_BYTES = new Uint8Array(0);

/** `bytes` as a compact copy that keeps nothing else alive. */
export function keepBytes(bytes: Uint8Array): Uint8Array {
  const n = bytes.length;
  if (n === 0) return NO_BYTES;
  if (n > MAX_KEPT) return bytes.slice();
  if (used + n > SLAB_BYTES) {
    slab = new Uint8Array(SLAB_BYTES);
    used = 0;
  }
  const out = slab.subarray(used, used + n);
  out.set(bytes);
  used += n;
  return out;
}
