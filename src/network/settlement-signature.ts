/**
 * Host signatures over a settlement state root: base64 of the 64-byte r||s (low-S, RFC 6979
 * deterministic) secp256k1 signature over sha256(state root bytes), where the state root is the hex
 * string of `Settlement.stateRoot` decoded to bytes. The chain checks these on settle.
 * Uses @cosmjs/crypto: settlement is rare, and deterministic signatures make retries idempotent.
 */
import { Secp256k1, Secp256k1Signature, sha256 } from '@cosmjs/crypto';
import { fromHex } from '@cosmjs/encoding';

export function stateRootDigest(stateRootHex: string): Uint8Array {
  return sha256(fromHex(stateRootHex));
}

export function signStateRoot(privateKey: Uint8Array, stateRootHex: string): string {
  const sig = Secp256k1.createSignature(stateRootDigest(stateRootHex), privateKey);
  return Buffer.from(sig.toFixedLength().slice(0, 64)).toString('base64');
}

export function verifyStateRootSignature(pubKey: Uint8Array, stateRootHex: string, signatureB64: string): boolean {
  const raw = Buffer.from(signatureB64, 'base64');
  if (raw.length !== 64) return false;
  try {
    return Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(raw), stateRootDigest(stateRootHex), pubKey);
  } catch {
    return false;
  }
}
