/**
 * secp256k1 signatures as devshard makes and checks them (gonka 8a35022 devshard/signing/secp256k1.go):
 * sign = sha256(message) once, then go-ethereum `crypto.Sign` (RFC 6979, low-S), giving 65 bytes
 * R‖S‖V with V in {0, 1}; recover = sha256(message), `crypto.Ecrecover`, then the signer's `gonka`
 * address = bech32("gonka", ripemd160(sha256(compressed public key))).
 *
 * Signing and recovery run in libsecp256k1 (the `secp256k1` package's prebuilt addon), the library
 * go-ethereum itself calls: ~40 µs to sign and ~60 µs to recover here against ~400 µs and ~1,300 µs
 * for @noble/curves (bench/crypto-bench.ts). RFC 6979 makes both produce the same bytes; noble stays
 * for the point arithmetic of addresses.
 */
import { toBech32 } from '@cosmjs/encoding';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { ripemd160 } from '@noble/hashes/legacy.js';
import libsecp256k1 from 'secp256k1';
import { sha256 } from './bytes.js';

/** The `gonka` bech32 address of a compressed (33-byte) or uncompressed (65-byte) public key. */
export function addressFromPublicKey(publicKey: Uint8Array): string {
  const compressed = publicKey.length === 33 ? publicKey : secp256k1.Point.fromBytes(publicKey).toBytes(true);
  // The same few keys (a session's hosts, warm keys) sign over and over: their address is kept.
  const key = Buffer.from(compressed.buffer, compressed.byteOffset, compressed.byteLength).toString('latin1');
  let address = addresses.get(key);
  if (address === undefined) {
    address = toBech32('gonka', ripemd160(sha256(compressed)));
    if (addresses.size >= MAX_ADDRESSES) addresses.clear();
    addresses.set(key, address);
  }
  return address;
}

/** Compressed public key (one char a byte) → its address; cleared when it reaches MAX_ADDRESSES. */
const addresses = new Map<string, string>();
const MAX_ADDRESSES = 4096;

/** The address of a private key. */
export const addressFromPrivateKey = (privateKey: Uint8Array): string => addressFromPublicKey(secp256k1.getPublicKey(privateKey, true));

/** Signs `message` (hashed once with sha256) and returns R‖S‖V, V in {0, 1}. */
export function signMessage(message: Uint8Array, privateKey: Uint8Array): Uint8Array {
  return signDigest(sha256(message), privateKey);
}

/** Signs a 32-byte digest as it is (no further hashing): R‖S‖V. */
export function signDigest(digest: Uint8Array, privateKey: Uint8Array): Uint8Array {
  // libsecp256k1 signs low-S with RFC 6979 nonces, as go-ethereum's crypto.Sign does.
  const { signature, recid } = libsecp256k1.ecdsaSign(digest, privateKey);
  const out = new Uint8Array(65);
  out.set(signature, 0);
  out[64] = recid;
  return out;
}

/** Why a signature does not recover: Go's error text (signing/secp256k1.go `RecoverAddress`). */
export class RecoverError extends Error {}

/**
 * The address that signed `message` (hashed once with sha256), or a RecoverError with Go's text:
 * `invalid signature length: N`, or `ecrecover failed: …` (go-ethereum's libsecp256k1 texts).
 */
export function recoverAddress(message: Uint8Array, signature: Uint8Array): string {
  return recoverDigestAddress(sha256(message), signature);
}

/** As recoverAddress, over a digest given as it is. */
export function recoverDigestAddress(digest: Uint8Array, signature: Uint8Array): string {
  if (signature.length !== 65) throw new RecoverError(`invalid signature length: ${signature.length}`);
  const v = signature[64]!;
  // go-ethereum secp256k1.RecoverPubkey: checkSignature rejects a recovery id >= 4.
  if (v >= 4) throw new RecoverError('ecrecover failed: invalid signature recovery id');
  let publicKey: Uint8Array;
  try {
    publicKey = libsecp256k1.ecdsaRecover(signature.subarray(0, 64), v, digest, true);
  } catch {
    throw new RecoverError('ecrecover failed: recovery failed');
  }
  return addressFromPublicKey(publicKey);
}
