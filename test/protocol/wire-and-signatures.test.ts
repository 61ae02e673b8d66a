/**
 * Bytes and signatures, pinned to gonka 8a35022:
 * - the keeper's golden host-stats hash (inference-chain/x/inference/keeper/devshard_settlement_test.go,
 *   TestComputeDevshardHostStatsHash_GoldenValue; also pinned in test/wire);
 * - InferenceRecordProto: `validated_by` (16 bytes) always written (devshard/state/hash.go
 *   marshalInferenceEntry, devshard/types/bitmap.go);
 * - unknown fields survive decode → re-encode, as protobuf-go keeps them (MACHINE.md rule 8);
 * - signatures: go-ethereum's RFC 6979 low-S signatures reproduced byte for byte (the golden vectors'
 *   user signatures, made by gonka's signing/secp256k1.go), R‖S‖V with V in {0, 1}, recovery errors;
 * - the request-header preimage (devshard/transport/auth.go; real-network.md §3 "Headers").
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { fromBech32 } from '@cosmjs/encoding';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fromHex, sha256, toHex, u64be, utf8 } from '../../src/protocol/bytes.js';
import { DevshardTxSchema, DiffContentSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { hostStatsHash } from '../../src/protocol/hashes.js';
import { inferenceEntry, InferenceStatus, type InferenceRecord } from '../../src/protocol/inference-record.js';
import { diffSignedBytes, diffWireBytes, finishProposerBytes, requestHeaderMessage } from '../../src/protocol/preimages.js';
import { addressFromPrivateKey, recoverAddress, recoverDigestAddress, signMessage } from '../../src/protocol/signatures.js';
import { loadVectors, txsOf } from './vectors.js';

const zeroRecord = (): InferenceRecord => ({
  id: 0n,
  status: InferenceStatus.Pending,
  executorSlot: 0,
  model: '',
  promptHash: new Uint8Array(0),
  responseHash: new Uint8Array(0),
  inputLength: 0n,
  maxTokens: 0n,
  inputTokens: 0n,
  outputTokens: 0n,
  reservedCost: 0n,
  actualCost: 0n,
  startedAt: 0n,
  confirmedAt: 0n,
  startedAtHeight: 0n,
  confirmedAtHeight: 0n,
  votesValid: 0,
  votesInvalid: 0,
  validatedBy: 0n,
});

describe('hashing inputs', () => {
  it('the keeper golden host-stats hash (TestComputeDevshardHostStatsHash_GoldenValue)', () => {
    const h = hostStatsHash([
      { slotId: 1, missed: 0, invalid: 1, cost: 200n, requiredValidations: 10, completedValidations: 8 },
      { slotId: 0, missed: 1, invalid: 0, cost: 100n, requiredValidations: 10, completedValidations: 9 },
    ]);
    expect(toHex(h)).toBe('a3231da94dd50999b9f609263ab7b666431576806437944779c10f8124579fd1');
  });

  it('an all-zero record still writes validated_by: field 17, 16 zero bytes, and nothing else', () => {
    expect(toHex(inferenceEntry(zeroRecord()))).toBe(`8a0110${'00'.repeat(16)}`);
  });

  it('validated_by is the 128-bit bitmap as two little-endian uint64 words', () => {
    const e = inferenceEntry({ ...zeroRecord(), validatedBy: (1n << 0n) | (1n << 9n) | (1n << 64n) | (1n << 127n) });
    expect(toHex(e)).toBe('8a0110' + '0102000000000000' + '0100000000000080');
  });

  it('proto3 defaults are omitted: DiffContent{nonce: 0, no txs, "", empty root} is empty; fields in number order', () => {
    expect(diffSignedBytes('', 0n, [], new Uint8Array(0))).toHaveLength(0);
    const b = diffSignedBytes('7', 1n, [], Uint8Array.of(9));
    expect(toHex(b)).toBe('0801' + '1a0137' + '220109');
    expect(toHex(diffWireBytes(1n, []))).toBe('0801');
  });

  it('unknown fields in a relayed MsgFinishInference stay in the proposer-signed bytes and in the diff', () => {
    const known = create(MsgFinishInferenceSchema, { inferenceId: 5n, inputTokens: 3n, executorSlot: 1, escrowId: 'e', proposerSig: Uint8Array.of(1, 2) });
    const unknown = Uint8Array.of(0xf8, 0x06, 0x2a); // field 111, varint 42
    const wire = new Uint8Array([...toBinary(MsgFinishInferenceSchema, known), ...unknown]);
    const decoded = fromBinary(MsgFinishInferenceSchema, wire);
    const signed = finishProposerBytes(decoded);
    const expected = new Uint8Array([...toBinary(MsgFinishInferenceSchema, { ...known, proposerSig: new Uint8Array(0) }), ...unknown]);
    expect(toHex(signed)).toBe(toHex(expected));
    // inside a DevshardTx inside the DiffContent the user signs
    const tx = fromBinary(DevshardTxSchema, toBinary(DevshardTxSchema, create(DevshardTxSchema, { tx: { case: 'finishInference', value: decoded } })));
    const roundTrip = fromBinary(DiffContentSchema, diffSignedBytes('e', 1n, [tx], new Uint8Array(0)));
    expect(toHex(finishProposerBytes(roundTrip.txs[0]!.tx.value as typeof decoded))).toBe(toHex(expected));
  });
});

describe('signatures (signing/secp256k1.go)', () => {
  const vectors = loadVectors();

  it('reproduces the golden vectors user signatures byte for byte (RFC 6979, low-S, R‖S‖V)', () => {
    let n = 0;
    for (const v of vectors) {
      const user = v.keys.find((k) => k.address === v.user_address)!;
      const priv = fromHex(user.priv_hex);
      expect(addressFromPrivateKey(priv)).toBe(v.user_address);
      for (const step of v.steps) {
        const bytes = diffSignedBytes(v.escrow_id, BigInt(step.nonce), txsOf(step), fromHex(step.post_state_root));
        expect(toHex(signMessage(bytes, priv))).toBe(step.user_sig);
        expect(recoverAddress(bytes, fromHex(step.user_sig))).toBe(v.user_address);
        n++;
      }
    }
    expect(n).toBeGreaterThan(140);
  });

  it('private key 1: the well-known hash160 751e76e8…3bd6 as a gonka address', () => {
    const priv = new Uint8Array(32);
    priv[31] = 1;
    const decoded = fromBech32(addressFromPrivateKey(priv), 90);
    expect(decoded.prefix).toBe('gonka');
    expect(toHex(decoded.data)).toBe('751e76e8199196d454941c45d1b3a323f1433bd6');
  });

  it('sign then recover, V in {0, 1}, S in the low half, for any key and message', () => {
    const half = secp256k1.Point.CURVE().n / 2n;
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ maxLength: 64 }), (seed, msg) => {
        const priv = sha256(seed); // valid scalar with overwhelming probability
        const sig = signMessage(msg, priv);
        expect(sig).toHaveLength(65);
        expect(sig[64]! <= 1).toBe(true);
        const s = BigInt(`0x${toHex(sig.subarray(32, 64))}`);
        expect(s <= half).toBe(true);
        expect(recoverAddress(msg, sig)).toBe(addressFromPrivateKey(priv));
      }),
      { numRuns: 40 },
    );
  });

  it('a high-S signature still recovers (libsecp256k1 recovery does not enforce low S)', () => {
    const priv = sha256(utf8('k'));
    const msg = utf8('hello');
    const sig = signMessage(msg, priv);
    const n = secp256k1.Point.CURVE().n;
    const s = BigInt(`0x${toHex(sig.subarray(32, 64))}`);
    const high = new Uint8Array(65);
    high.set(sig.subarray(0, 32));
    high.set(fromHex((n - s).toString(16).padStart(64, '0')), 32);
    high[64] = sig[64]! ^ 1;
    expect(recoverAddress(msg, high)).toBe(addressFromPrivateKey(priv));
  });

  it('recovery errors carry Go texts', () => {
    expect(() => recoverAddress(utf8('x'), new Uint8Array(64))).toThrow('invalid signature length: 64');
    const sig = signMessage(utf8('x'), sha256(utf8('k')));
    const badV = Uint8Array.from(sig);
    badV[64] = 4;
    expect(() => recoverAddress(utf8('x'), badV)).toThrow('ecrecover failed: invalid signature recovery id');
    expect(() => recoverAddress(utf8('x'), new Uint8Array(65))).toThrow(/^ecrecover failed: /);
  });

  it('request header: the signer hashes sha256(escrow_id ‖ body ‖ ts_be8) once more', () => {
    const priv = sha256(utf8('creator'));
    const body = utf8('{"nonce":1}');
    const inner = requestHeaderMessage('42', body, 1_760_000_000n);
    expect(inner).toEqual(sha256(utf8('42'), body, u64be(1_760_000_000n)));
    const sig = signMessage(inner, priv);
    expect(recoverDigestAddress(sha256(sha256(utf8('42'), body, u64be(1_760_000_000n))), sig)).toBe(addressFromPrivateKey(priv));
  });
});
