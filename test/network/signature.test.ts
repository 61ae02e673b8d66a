import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createRequestSigner } from '../../src/network/signature.js';
import { recoverAddress, signMessage } from '../../src/protocol/signatures.js';
import { newKey } from './fixtures.js';

describe("the creator's signer (devshard protocol signatures)", () => {
  const key = newKey();
  const message = new TextEncoder().encode('{"model":"m","messages":[]}');

  it('makes 65-byte R‖S‖V signatures over sha256(message) that recover to the creator address', () => {
    const signer = createRequestSigner(key.privateKeyHex);
    const sig = signer.signProtocol(message);
    expect(sig.length).toBe(65);
    expect(sig[64]! <= 1).toBe(true);
    expect(recoverAddress(message, sig)).toBe(key.address);
    expect(Buffer.from(sig).equals(Buffer.from(signMessage(message, key.privateKey)))).toBe(true);
    expect(recoverAddress(new TextEncoder().encode('{}'), sig)).not.toBe(key.address);
  });

  it('never reveals the key: not in JSON, inspect output or errors', () => {
    const signer = createRequestSigner(key.privateKeyHex);
    expect(JSON.stringify(signer)).not.toContain(key.privateKeyHex);
    expect(inspect(signer, { showHidden: true, depth: 5 })).not.toContain(key.privateKeyHex);
    const bad = key.privateKeyHex.slice(0, 63) + 'z';
    expect(() => createRequestSigner(bad)).toThrow(/64 hex/);
    try {
      createRequestSigner(bad);
    } catch (err) {
      expect(String((err as Error).message)).not.toContain(bad);
    }
    expect(() => createRequestSigner('0'.repeat(64))).toThrow(/secp256k1/);
  });
});
