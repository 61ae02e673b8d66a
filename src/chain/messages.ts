/**
 * The chain messages shardgate signs, from the generated code of proto/inference/inference/*.proto
 * (protoc-gen-es), wrapped so @cosmjs/proto-signing's Registry can encode them. protobuf-es writes
 * uint64 over the whole range; cosmjs-types 0.11's writer does not (docs/chain.md).
 */
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { Registry, type GeneratedType } from '@cosmjs/proto-signing';
import { defaultRegistryTypes } from '@cosmjs/stargate';
import {
  MsgCreateDevshardEscrowResponseSchema,
  MsgCreateDevshardEscrowSchema,
  MsgSettleDevshardEscrowResponseSchema,
  MsgSettleDevshardEscrowSchema,
} from './gen/inference/inference/tx_pb.js';

export type {
  MsgCreateDevshardEscrow,
  MsgCreateDevshardEscrowResponse,
  MsgSettleDevshardEscrow,
} from './gen/inference/inference/tx_pb.js';
export type { DevshardSettlementHostStats, DevshardSlotSignature } from './gen/inference/inference/devshard_escrow_pb.js';

/** A generated message type with its Cosmos type URL and the encode/decode pair the Registry calls. */
export interface ChainMessageType<D extends DescMessage, U extends string = string> {
  readonly typeUrl: U;
  readonly schema: D;
  create(init: MessageInitShape<D>): MessageShape<D>;
  encode(message: MessageInitShape<D>): Uint8Array;
  /** Strict as Go's decoder on what matters here: a field number 0 or a truncated varint throws. */
  decode(bytes: Uint8Array): MessageShape<D>;
}

function chainMessage<D extends DescMessage, U extends string>(schema: D, typeUrl: U): ChainMessageType<D, U> {
  // The type URL is spelled out for the type checker; it must be the schema's own name.
  if (typeUrl !== `/${schema.typeName}`) throw new Error(`type URL ${typeUrl} is not /${schema.typeName}`);
  return {
    typeUrl,
    schema,
    create: (init) => create(schema, init),
    encode: (message) => toBinary(schema, create(schema, message)),
    decode: (bytes) => fromBinary(schema, bytes),
  };
}

export const MsgCreateDevshardEscrowType = chainMessage(MsgCreateDevshardEscrowSchema, '/inference.inference.MsgCreateDevshardEscrow');
export const MsgCreateDevshardEscrowResponseType = chainMessage(MsgCreateDevshardEscrowResponseSchema, '/inference.inference.MsgCreateDevshardEscrowResponse');
export const MsgSettleDevshardEscrowType = chainMessage(MsgSettleDevshardEscrowSchema, '/inference.inference.MsgSettleDevshardEscrow');
export const MsgSettleDevshardEscrowResponseType = chainMessage(MsgSettleDevshardEscrowResponseSchema, '/inference.inference.MsgSettleDevshardEscrowResponse');

/** The ts-proto shape the Registry expects (fromPartial, then encode(...).finish(), decode). */
function registryType<D extends DescMessage>(t: ChainMessageType<D>): GeneratedType {
  return {
    fromPartial: (o: MessageInitShape<D>) => t.create(o),
    encode: (m: MessageInitShape<D>) => {
      const bytes = t.encode(m);
      return { finish: () => bytes };
    },
    decode: (input: Uint8Array) => t.decode(input),
  } as unknown as GeneratedType;
}

export const devshardTypes: ReadonlyArray<[string, GeneratedType]> = [
  [MsgCreateDevshardEscrowType.typeUrl, registryType(MsgCreateDevshardEscrowType)],
  [MsgSettleDevshardEscrowType.typeUrl, registryType(MsgSettleDevshardEscrowType)],
];

export function devshardRegistry(): Registry {
  return new Registry([...defaultRegistryTypes, ...devshardTypes]);
}
