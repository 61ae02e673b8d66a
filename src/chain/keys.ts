/** Key and address helpers shared by the client and the devnet (bech32 prefix `gonka`). */
import { rawSecp256k1PubkeyToRawAddress } from '@cosmjs/amino';
import { Secp256k1, sha256 } from '@cosmjs/crypto';
import { fromHex, toBech32, toHex, toUtf8 } from '@cosmjs/encoding';
import { isPrivateKeyHex } from '../config/private-key.js';

export { isPrivateKeyHex, PRIVATE_KEY_RULE } from '../config/private-key.js';

export const BECH32_PREFIX = 'gonka';
export const DENOM = 'ngonka';

/** Parses a 64-hex private key; the message never echoes the key. */
export function privateKeyBytes(privateKeyHex: string): Uint8Array {
  const trimmed = privateKeyHex.trim().replace(/^0x/i, '');
  if (!isPrivateKeyHex(trimmed)) throw new Error('private key must be 64 hex characters and a valid secp256k1 key');
  return fromHex(trimmed);
}

export function compressedPubKey(privateKey: Uint8Array): Uint8Array {
  return Secp256k1.compressPubkey(Secp256k1.makeKeypair(privateKey).pubkey);
}

export function addressOfPubKey(pubKey33: Uint8Array, prefix = BECH32_PREFIX): string {
  return toBech32(prefix, rawSecp256k1PubkeyToRawAddress(pubKey33));
}

export function addressOfPrivateKey(privateKeyHex: string, prefix = BECH32_PREFIX): string {
  return addressOfPubKey(compressedPubKey(privateKeyBytes(privateKeyHex)), prefix);
}

/** A reproducible test key: sha256 of a fixed seed (devnet genesis only, never for real funds). */
export function deterministicKeyHex(seed: string): string {
  return toHex(sha256(toUtf8(seed)));
}

/** 64-byte r||s secp256k1 signature over sha256(message), as hosts sign state roots. */
export function signSha256(privateKey: Uint8Array, message: Uint8Array): Uint8Array {
  const sig = Secp256k1.createSignature(sha256(message), privateKey);
  return new Uint8Array([...sig.r(32), ...sig.s(32)]);
}
