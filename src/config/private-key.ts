/**
 * The shape check of a creator private key, free of crypto dependencies (config loading uses it).
 * 64 hex characters are not enough: secp256k1 accepts only 0 < k < n (the curve order), so an
 * all-zero key or one at/above n passed the pattern and then threw deep inside key derivation (a
 * 500 on POST /v1/admin/escrows). Callers refuse such keys up front with a 400 that never echoes it.
 */
const HEX64 = /^[0-9a-fA-F]{64}$/;
const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

export const PRIVATE_KEY_RULE = 'must be 64 hexadecimal characters without a 0x prefix, encoding a valid secp256k1 key (not zero, below the curve order)';

/** 64 hex characters (no 0x) that are a usable secp256k1 private key. */
export function isPrivateKeyHex(value: string): boolean {
  if (!HEX64.test(value)) return false;
  const k = BigInt(`0x${value}`);
  return k > 0n && k < SECP256K1_ORDER;
}
