/**
 * `inference.inference.MsgSettleDevshardEscrow`, its embedded host stats and slot signatures, and
 * its (empty) response. Same generated-code style as cosmjs-types; field numbers are documented in
 * docs/chain.md and follow the layout the network's own devshard tooling encodes:
 *
 *   MsgSettleDevshardEscrow  settler=1 string, escrow_id=2 uint64, state_root=3 bytes, nonce=4 uint64,
 *                            rest_hash=5 bytes, host_stats=6 repeated DevshardHostStats,
 *                            signatures=7 repeated DevshardSlotSignature, fees=8 uint64,
 *                            state_root_and_protocol_version=9 string
 *   DevshardHostStats        slot_id=1 uint32, missed=2 int32, invalid=3 int32, cost=4 uint64,
 *                            required_validations=5 int32, completed_validations=6 int32
 *   DevshardSlotSignature    slot_id=1 uint32, signature=2 bytes (64-byte r||s)
 */
import { BinaryReader, BinaryWriter } from 'cosmjs-types/binary';
import type { DeepPartial } from 'cosmjs-types/helpers';

export interface DevshardHostStats {
  slotId: number;
  missed: number;
  invalid: number;
  cost: bigint;
  requiredValidations: number;
  completedValidations: number;
}

export interface DevshardSlotSignature {
  slotId: number;
  signature: Uint8Array;
}

export interface MsgSettleDevshardEscrow {
  settler: string;
  escrowId: bigint;
  stateRoot: Uint8Array;
  nonce: bigint;
  restHash: Uint8Array;
  hostStats: DevshardHostStats[];
  signatures: DevshardSlotSignature[];
  fees: bigint;
  stateRootAndProtocolVersion: string;
}

// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface MsgSettleDevshardEscrowResponse {}

const toBig = (v: unknown): bigint => (v !== undefined && v !== null ? BigInt(String(v)) : BigInt(0));

function createBaseDevshardHostStats(): DevshardHostStats {
  return { slotId: 0, missed: 0, invalid: 0, cost: BigInt(0), requiredValidations: 0, completedValidations: 0 };
}

export const DevshardHostStats = {
  typeUrl: '/inference.inference.DevshardHostStats' as const,
  encode(message: DevshardHostStats, writer: BinaryWriter = BinaryWriter.create()): BinaryWriter {
    if (message.slotId !== 0) writer.uint32(8).uint32(message.slotId);
    if (message.missed !== 0) writer.uint32(16).int32(message.missed);
    if (message.invalid !== 0) writer.uint32(24).int32(message.invalid);
    if (message.cost !== BigInt(0)) writer.uint32(32).uint64(message.cost);
    if (message.requiredValidations !== 0) writer.uint32(40).int32(message.requiredValidations);
    if (message.completedValidations !== 0) writer.uint32(48).int32(message.completedValidations);
    return writer;
  },
  decode(input: BinaryReader | Uint8Array, length?: number): DevshardHostStats {
    const reader = input instanceof BinaryReader ? input : new BinaryReader(input);
    const end = length === undefined ? reader.len : reader.pos + length;
    const message = createBaseDevshardHostStats();
    while (reader.pos < end) {
      const tag = reader.uint32();
      switch (tag >>> 3) {
        case 1:
          message.slotId = reader.uint32();
          break;
        case 2:
          message.missed = reader.int32();
          break;
        case 3:
          message.invalid = reader.int32();
          break;
        case 4:
          message.cost = reader.uint64();
          break;
        case 5:
          message.requiredValidations = reader.int32();
          break;
        case 6:
          message.completedValidations = reader.int32();
          break;
        default:
          reader.skipType(tag & 7);
          break;
      }
    }
    return message;
  },
  fromPartial(object: DeepPartial<DevshardHostStats>): DevshardHostStats {
    const message = createBaseDevshardHostStats();
    message.slotId = object.slotId ?? 0;
    message.missed = object.missed ?? 0;
    message.invalid = object.invalid ?? 0;
    message.cost = toBig(object.cost);
    message.requiredValidations = object.requiredValidations ?? 0;
    message.completedValidations = object.completedValidations ?? 0;
    return message;
  },
};

function createBaseDevshardSlotSignature(): DevshardSlotSignature {
  return { slotId: 0, signature: new Uint8Array() };
}

export const DevshardSlotSignature = {
  typeUrl: '/inference.inference.DevshardSlotSignature' as const,
  encode(message: DevshardSlotSignature, writer: BinaryWriter = BinaryWriter.create()): BinaryWriter {
    if (message.slotId !== 0) writer.uint32(8).uint32(message.slotId);
    if (message.signature.length !== 0) writer.uint32(18).bytes(message.signature);
    return writer;
  },
  decode(input: BinaryReader | Uint8Array, length?: number): DevshardSlotSignature {
    const reader = input instanceof BinaryReader ? input : new BinaryReader(input);
    const end = length === undefined ? reader.len : reader.pos + length;
    const message = createBaseDevshardSlotSignature();
    while (reader.pos < end) {
      const tag = reader.uint32();
      switch (tag >>> 3) {
        case 1:
          message.slotId = reader.uint32();
          break;
        case 2:
          message.signature = reader.bytes();
          break;
        default:
          reader.skipType(tag & 7);
          break;
      }
    }
    return message;
  },
  fromPartial(object: DeepPartial<DevshardSlotSignature>): DevshardSlotSignature {
    const message = createBaseDevshardSlotSignature();
    message.slotId = object.slotId ?? 0;
    message.signature = object.signature ?? new Uint8Array();
    return message;
  },
};

function createBaseMsgSettleDevshardEscrow(): MsgSettleDevshardEscrow {
  return {
    settler: '',
    escrowId: BigInt(0),
    stateRoot: new Uint8Array(),
    nonce: BigInt(0),
    restHash: new Uint8Array(),
    hostStats: [],
    signatures: [],
    fees: BigInt(0),
    stateRootAndProtocolVersion: '',
  };
}

export const MsgSettleDevshardEscrow = {
  typeUrl: '/inference.inference.MsgSettleDevshardEscrow' as const,
  encode(message: MsgSettleDevshardEscrow, writer: BinaryWriter = BinaryWriter.create()): BinaryWriter {
    if (message.settler !== '') writer.uint32(10).string(message.settler);
    if (message.escrowId !== BigInt(0)) writer.uint32(16).uint64(message.escrowId);
    if (message.stateRoot.length !== 0) writer.uint32(26).bytes(message.stateRoot);
    if (message.nonce !== BigInt(0)) writer.uint32(32).uint64(message.nonce);
    if (message.restHash.length !== 0) writer.uint32(42).bytes(message.restHash);
    for (const v of message.hostStats) DevshardHostStats.encode(v, writer.uint32(50).fork()).ldelim();
    for (const v of message.signatures) DevshardSlotSignature.encode(v, writer.uint32(58).fork()).ldelim();
    if (message.fees !== BigInt(0)) writer.uint32(64).uint64(message.fees);
    if (message.stateRootAndProtocolVersion !== '') writer.uint32(74).string(message.stateRootAndProtocolVersion);
    return writer;
  },
  decode(input: BinaryReader | Uint8Array, length?: number): MsgSettleDevshardEscrow {
    const reader = input instanceof BinaryReader ? input : new BinaryReader(input);
    const end = length === undefined ? reader.len : reader.pos + length;
    const message = createBaseMsgSettleDevshardEscrow();
    while (reader.pos < end) {
      const tag = reader.uint32();
      switch (tag >>> 3) {
        case 1:
          message.settler = reader.string();
          break;
        case 2:
          message.escrowId = reader.uint64();
          break;
        case 3:
          message.stateRoot = reader.bytes();
          break;
        case 4:
          message.nonce = reader.uint64();
          break;
        case 5:
          message.restHash = reader.bytes();
          break;
        case 6:
          message.hostStats.push(DevshardHostStats.decode(reader, reader.uint32()));
          break;
        case 7:
          message.signatures.push(DevshardSlotSignature.decode(reader, reader.uint32()));
          break;
        case 8:
          message.fees = reader.uint64();
          break;
        case 9:
          message.stateRootAndProtocolVersion = reader.string();
          break;
        default:
          reader.skipType(tag & 7);
          break;
      }
    }
    return message;
  },
  fromPartial(object: DeepPartial<MsgSettleDevshardEscrow>): MsgSettleDevshardEscrow {
    const message = createBaseMsgSettleDevshardEscrow();
    message.settler = object.settler ?? '';
    message.escrowId = toBig(object.escrowId);
    message.stateRoot = object.stateRoot ?? new Uint8Array();
    message.nonce = toBig(object.nonce);
    message.restHash = object.restHash ?? new Uint8Array();
    message.hostStats = object.hostStats?.map((e) => DevshardHostStats.fromPartial(e)) ?? [];
    message.signatures = object.signatures?.map((e) => DevshardSlotSignature.fromPartial(e)) ?? [];
    message.fees = toBig(object.fees);
    message.stateRootAndProtocolVersion = object.stateRootAndProtocolVersion ?? '';
    return message;
  },
};

export const MsgSettleDevshardEscrowResponse = {
  typeUrl: '/inference.inference.MsgSettleDevshardEscrowResponse' as const,
  encode(_: MsgSettleDevshardEscrowResponse, writer: BinaryWriter = BinaryWriter.create()): BinaryWriter {
    return writer;
  },
  decode(input: BinaryReader | Uint8Array, length?: number): MsgSettleDevshardEscrowResponse {
    const reader = input instanceof BinaryReader ? input : new BinaryReader(input);
    const end = length === undefined ? reader.len : reader.pos + length;
    while (reader.pos < end) {
      const tag = reader.uint32();
      reader.skipType(tag & 7);
    }
    return {};
  },
  fromPartial(_: DeepPartial<MsgSettleDevshardEscrowResponse>): MsgSettleDevshardEscrowResponse {
    return {};
  },
};
