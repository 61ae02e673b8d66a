import { describe, expect, it } from 'vitest';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { keepBytes, NO_BYTES } from '../../src/protocol/byte-slab.js';
import { DevshardTxSchema } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgFinishInferenceSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';

describe('keepBytes (the live records\' hashes)', () => {
  it('copies a decoded field out of the message it is a view of, equal and independent', () => {
    const responseHash = new Uint8Array(32).map((_, i) => i + 1);
    const wire = toBinary(DevshardTxSchema, create(DevshardTxSchema, { tx: { case: 'finishInference', value: create(MsgFinishInferenceSchema, { inferenceId: 7n, responseHash }) } }));
    const msg = fromBinary(DevshardTxSchema, wire).tx.value as { responseHash: Uint8Array };
    // protobuf-es hands out a view of the whole message: keeping it keeps the message alive.
    expect(msg.responseHash.buffer).toBe(wire.buffer);
    const kept = keepBytes(msg.responseHash);
    expect(kept).toEqual(responseHash);
    expect(kept.buffer).not.toBe(wire.buffer);
    wire.fill(0);
    expect(kept).toEqual(responseHash);
  });

  it('shares slabs between small copies and gives large ones an array of their own', () => {
    const a = keepBytes(new Uint8Array(32).fill(1));
    const b = keepBytes(new Uint8Array(32).fill(2));
    expect(a.buffer).toBe(b.buffer);
    expect([...a].every((x) => x === 1) && [...b].every((x) => x === 2)).toBe(true);
    const big = new Uint8Array(1000).fill(3);
    const kept = keepBytes(big);
    expect(kept).toEqual(big);
    expect(kept.buffer).not.toBe(big.buffer);
    expect(kept.byteLength).toBe(kept.buffer.byteLength);
    expect(keepBytes(new Uint8Array(0))).toBe(NO_BYTES);
  });

  it('starts a new slab when one is full, leaving the earlier copies as they were', () => {
    const first = keepBytes(new Uint8Array(200).fill(9));
    const later: Uint8Array[] = [];
    for (let i = 0; i < 400; i++) later.push(keepBytes(new Uint8Array(200).fill(i % 256)));
    expect([...first].every((x) => x === 9)).toBe(true);
    later.forEach((c, i) => expect(c[0]).toBe(i % 256));
    expect(new Set(later.map((c) => c.buffer)).size).toBeGreaterThan(1);
  });
});
