/** Fixed-width integer encodings and byte helpers shared by the hashes (pure). */
import { hash } from 'node:crypto';

export const U64_MAX = (1n << 64n) - 1n;

export function sha256(...parts: Uint8Array[]): Uint8Array {
  // One-shot crypto.hash (Node >= 20.12): no Hash object per call.
  const data = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  return new Uint8Array(hash('sha256', data, 'buffer') as unknown as Buffer);
}

export function u64be(v: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt.asUintN(64, v));
  return out;
}

export function u32be(v: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, v >>> 0);
  return out;
}

export const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

export const toHex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');

export const fromHex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A protobuf varint (for the live-set framing, hash.go `computeInferencesHashFromEntries`). */
export function varint(v: number): Uint8Array {
  const out: number[] = [];
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Uint8Array.from(out);
}
