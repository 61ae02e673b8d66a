/**
 * `inference.inference.MsgCreateDevshardEscrow` and its response, written in the same style as the
 * cosmjs-types generated code (encode / decode / fromPartial over cosmjs-types' BinaryWriter and
 * BinaryReader), so both plug into a @cosmjs/proto-signing `Registry` as `GeneratedType`s.
 *
 * Wire (proto3): creator = 1 (string), amount = 2 (uint64), model_id = 3 (string).
 * Response: escrow_id = 1 (uint64).
 */
import { BinaryReader, BinaryWriter } from 'cosmjs-types/binary';
import type { DeepPartial } from 'cosmjs-types/helpers';

export interface MsgCreateDevshardEscrow {
  creator: string;
  amount: bigint;
  modelId: string;
}

export interface MsgCreateDevshardEscrowResponse {
  escrowId: bigint;
}

function createBaseMsgCreateDevshardEscrow(): MsgCreateDevshardEscrow {
  return { creator: '', amount: BigInt(0), modelId: '' };
}

export const MsgCreateDevshardEscrow = {
  typeUrl: '/inference.inference.MsgCreateDevshardEscrow' as const,
  encode(message: MsgCreateDevshardEscrow, writer: BinaryWriter = BinaryWriter.create()): BinaryWriter {
    if (message.creator !== '') writer.uint32(10).string(message.creator);
    if (message.amount !== BigInt(0)) writer.uint32(16).uint64(message.amount);
    if (message.modelId !== '') writer.uint32(26).string(message.modelId);
    return writer;
  },
  decode(input: BinaryReader | Uint8Array, length?: number): MsgCreateDevshardEscrow {
    const reader = input instanceof BinaryReader ? input : new BinaryReader(input);
    const end = length === undefined ? reader.len : reader.pos + length;
    const message = createBaseMsgCreateDevshardEscrow();
    while (reader.pos < end) {
      const tag = reader.uint32();
      switch (tag >>> 3) {
        case 1:
          message.creator = reader.string();
          break;
        case 2:
          message.amount = reader.uint64();
          break;
        case 3:
          message.modelId = reader.string();
          break;
        default:
          reader.skipType(tag & 7);
          break;
      }
    }
    return message;
  },
  fromPartial(object: DeepPartial<MsgCreateDevshardEscrow>): MsgCreateDevshardEscrow {
    const message = createBaseMsgCreateDevshardEscrow();
    message.creator = object.creator ?? '';
    message.amount = object.amount !== undefined && object.amount !== null ? BigInt(object.amount.toString()) : BigInt(0);
    message.modelId = object.modelId ?? '';
    return message;
  },
};

function createBaseMsgCreateDevshardEscrowResponse(): MsgCreateDevshardEscrowResponse {
  return { escrowId: BigInt(0) };
}

export const MsgCreateDevshardEscrowResponse = {
  typeUrl: '/inference.inference.MsgCreateDevshardEscrowResponse' as const,
  encode(message: MsgCreateDevshardEscrowResponse, writer: BinaryWriter = BinaryWriter.create()): BinaryWriter {
    if (message.escrowId !== BigInt(0)) writer.uint32(8).uint64(message.escrowId);
    return writer;
  },
  decode(input: BinaryReader | Uint8Array, length?: number): MsgCreateDevshardEscrowResponse {
    const reader = input instanceof BinaryReader ? input : new BinaryReader(input);
    const end = length === undefined ? reader.len : reader.pos + length;
    const message = createBaseMsgCreateDevshardEscrowResponse();
    while (reader.pos < end) {
      const tag = reader.uint32();
      switch (tag >>> 3) {
        case 1:
          message.escrowId = reader.uint64();
          break;
        default:
          reader.skipType(tag & 7);
          break;
      }
    }
    return message;
  },
  fromPartial(object: DeepPartial<MsgCreateDevshardEscrowResponse>): MsgCreateDevshardEscrowResponse {
    const message = createBaseMsgCreateDevshardEscrowResponse();
    message.escrowId =
      object.escrowId !== undefined && object.escrowId !== null ? BigInt(object.escrowId.toString()) : BigInt(0);
    return message;
  },
};
