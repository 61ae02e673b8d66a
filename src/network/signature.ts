/**
 * The creator's signer for the devshard host protocol (docs/protocol.md): it holds the escrow
 * creator's key and makes the protocol's 65-byte R‖S‖V signatures (diffs, the request header
 * `X-Devshard-Signature`) over sha256(message), as gonka's signing/secp256k1.go does
 * (src/protocol/signatures.ts).
 */
import { Secp256k1 } from '@cosmjs/crypto';
import { signMessage } from '../protocol/signatures.js';
import type { RequestSigner } from './port.js';

/**
 * A signer holding the creator key in its closure. The hex string is parsed once and dropped; only
 * the scalar remains, which neither logging nor JSON serialisation reveals. Errors never include
 * the key.
 */
export function createRequestSigner(privateKeyHex: string): RequestSigner {
  if (typeof privateKeyHex !== 'string' || !/^[0-9a-fA-F]{64}$/.test(privateKeyHex)) {
    throw new Error('invalid creator private key: expected 64 hex characters without 0x');
  }
  const raw = Buffer.from(privateKeyHex, 'hex');
  // The devshard protocol signs with libsecp256k1 (65-byte recoverable signatures); it needs the scalar.
  const scalar = new Uint8Array(raw);
  try {
    Secp256k1.makeKeypair(raw);
  } catch {
    scalar.fill(0);
    throw new Error('invalid creator private key: not a valid secp256k1 scalar');
  } finally {
    raw.fill(0);
  }
  return Object.freeze({
    signProtocol(message: Uint8Array): Uint8Array {
      return signMessage(message, scalar);
    },
    toJSON: () => '[RequestSigner]',
  });
}
