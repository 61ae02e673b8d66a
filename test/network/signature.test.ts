import { inspect } from 'node:util';
import { Secp256k1, Secp256k1Signature } from '@cosmjs/crypto';
import { describe, expect, it } from 'vitest';
import { createRequestSigner, createSignatureVerifier, requestDigest, timestampBytes } from '../../src/network/signature.js';
import { newKey } from './fixtures.js';

const HALF_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n >> 1n;

describe('request signatures', () => {
  const key = newKey();
  const body = new TextEncoder().encode('{"model":"m","messages":[]}');

  it('produces 64-byte low-S signatures that cosmjs verifies over sha256(escrow || body || ts u64 BE)', () => {
    const signer = createRequestSigner(key.privateKeyHex);
    for (let i = 0; i < 20; i++) {
      const ts = 1_700_000_000 + i;
      const raw = Buffer.from(signer.sign('42', body, ts), 'base64');
      expect(raw.length).toBe(64);
      expect(BigInt('0x' + raw.subarray(32).toString('hex')) <= HALF_ORDER).toBe(true);
      const ok = Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(raw), requestDigest('42', body, ts), key.pubKey);
      expect(ok).toBe(true);
    }
  });

  it('encodes the timestamp as 8-byte big-endian seconds', () => {
    expect(timestampBytes(1).toString('hex')).toBe('0000000000000001');
    expect(timestampBytes(2 ** 32 + 5).toString('hex')).toBe('0000000100000005');
  });

  it('a signature for one escrow, body or timestamp does not verify for another', () => {
    const signer = createRequestSigner(key.privateKeyHex);
    const verifier = createSignatureVerifier();
    const sig = signer.sign('42', body, 100);
    expect(verifier.verify(key.pubKey, '42', body, 100, sig)).toBe(true);
    expect(verifier.verify(key.pubKey, '43', body, 100, sig)).toBe(false);
    expect(verifier.verify(key.pubKey, '42', body, 101, sig)).toBe(false);
    expect(verifier.verify(key.pubKey, '42', new TextEncoder().encode('{}'), 100, sig)).toBe(false);
    expect(verifier.verify(newKey().pubKey, '42', body, 100, sig)).toBe(false);
    expect(verifier.verify(key.pubKey, '42', body, 100, 'not base64!')).toBe(false);
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
