/**
 * The generated wire code (proto/ -> src/{protocol,chain}/gen) pinned to the network's bytes:
 * - uint64 over the whole range, read back by a varint decoder written here (not protobuf-es's);
 * - the chain keeper's golden host-stats hash (gonka-ai/gonka 8a35022,
 *   inference-chain/x/inference/keeper/devshard_settlement_test.go,
 *   TestComputeDevshardHostStatsHash_GoldenValue);
 * - decoding as strict as Go's on a field number 0.
 */
import { createHash } from 'node:crypto';
import { create, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DevshardHostStatsMapProtoSchema } from '../../src/chain/gen/inference/inference/devshard_settlement_pb.js';
import { MsgCreateDevshardEscrowType, MsgSettleDevshardEscrowType } from '../../src/chain/messages.js';
import { HostStatsMapProtoSchema } from '../../src/protocol/gen/devshard/v1/state_pb.js';

/** Reads proto3 fields as (number, wire type, value) with plain arithmetic on BigInt. */
function readFields(bytes: Uint8Array): Array<{ field: number; wire: number; value: bigint | Uint8Array }> {
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (pos >= bytes.length) throw new Error('truncated varint');
      if (shift > 63n) throw new Error('varint longer than 10 bytes');
      const b = bytes[pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
    }
  };
  const out: Array<{ field: number; wire: number; value: bigint | Uint8Array }> = [];
  while (pos < bytes.length) {
    const key = varint();
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (field === 0) throw new Error('field number 0');
    if (wire === 0) out.push({ field, wire, value: varint() });
    else if (wire === 2) {
      const len = Number(varint());
      out.push({ field, wire, value: bytes.slice(pos, pos + len) });
      pos += len;
    } else throw new Error(`unexpected wire type ${wire}`);
  }
  return out;
}

const MAX_U64 = (1n << 64n) - 1n;
const EDGES = [0n, 1n, 127n, 128n, (1n << 31n) - 1n, 1n << 31n, 3_000_000_000n, (1n << 32n) - 1n, 1n << 32n, 1n << 53n, 1n << 63n, MAX_U64];

describe('uint64 on the wire (cosmjs-types 0.11 mis-encodes [2^31, 2^32))', () => {
  const roundTrip = (amount: bigint) => {
    const bytes = MsgCreateDevshardEscrowType.encode({ creator: 'gonka1creator', amount, modelId: 'm' });
    const fields = readFields(bytes);
    const amountField = fields.find((f) => f.field === 2);
    // proto3 leaves a zero out; every other value is one varint field 2.
    expect(amountField?.value ?? 0n).toBe(amount);
    expect(MsgCreateDevshardEscrowType.decode(bytes).amount).toBe(amount);
  };

  it.each(EDGES.map((v) => [v.toString(), v]))('MsgCreateDevshardEscrow.amount = %s round-trips', (_s, v) => roundTrip(v));

  it('every uint64 in [0, 2^64) round-trips (property, edges always included)', () => {
    fc.assert(fc.property(fc.oneof(fc.constantFrom(...EDGES), fc.bigInt({ min: 0n, max: MAX_U64 })), roundTrip), { numRuns: 2000 });
  });

  it('settle: escrow_id, nonce, fees and cost over the range, each read back by field number', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_U64 }), fc.bigInt({ min: 1n, max: MAX_U64 }), (x, y) => {
        const bytes = MsgSettleDevshardEscrowType.encode({
          settler: 's',
          escrowId: x,
          nonce: y,
          fees: y,
          hostStats: [{ slotId: 0, cost: x }],
          stateRootAndProtocolVersion: 'v2',
        });
        const fields = readFields(bytes);
        const get = (n: number) => fields.find((f) => f.field === n)?.value;
        expect(get(2) ?? 0n).toBe(x);
        expect(get(4)).toBe(y);
        expect(get(8)).toBe(y);
        const stats = readFields(get(6) as Uint8Array);
        expect(stats.find((f) => f.field === 4)?.value ?? 0n).toBe(x);
      }),
      { numRuns: 500 },
    );
  });

  it('the bytes cosmjs-types 0.11 writes for 3,000,000,000 (a field-0 tag) are refused, not read as a small amount', () => {
    // Field 2 as cosmjs-types 0.11 wrote it: the low byte, then four zero bytes.
    const bad = Uint8Array.from([0x10, 0x80, 0x00, 0x00, 0x00, 0x00]);
    expect(() => MsgCreateDevshardEscrowType.decode(bad)).toThrow(/field no 0|illegal tag/i);
  });
});

describe('host stats hash (keeper golden value)', () => {
  const entries = [
    { slotId: 0, missed: 1, invalid: 0, cost: 100n, requiredValidations: 10, completedValidations: 9 },
    { slotId: 1, missed: 0, invalid: 1, cost: 200n, requiredValidations: 10, completedValidations: 8 },
  ];
  const GOLDEN = 'a3231da94dd50999b9f609263ab7b666431576806437944779c10f8124579fd1';

  it('the chain-side DevshardHostStatsMapProto hashes to the keeper test value', () => {
    const bytes = toBinary(DevshardHostStatsMapProtoSchema, create(DevshardHostStatsMapProtoSchema, { entries }));
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(GOLDEN);
  });

  it('the devshard-side HostStatsMapProto encodes identically (state.proto is frozen to match)', () => {
    const bytes = toBinary(HostStatsMapProtoSchema, create(HostStatsMapProtoSchema, { entries }));
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(GOLDEN);
  });
});
