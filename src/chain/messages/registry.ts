/** A proto-signing Registry that knows the cosmos defaults plus both devshard escrow messages. */
import { Registry, type GeneratedType } from '@cosmjs/proto-signing';
import { defaultRegistryTypes } from '@cosmjs/stargate';
import { MsgCreateDevshardEscrow } from './create-devshard-escrow.js';
import { MsgSettleDevshardEscrow } from './settle-devshard-escrow.js';

export const devshardTypes: ReadonlyArray<[string, GeneratedType]> = [
  [MsgCreateDevshardEscrow.typeUrl, MsgCreateDevshardEscrow],
  [MsgSettleDevshardEscrow.typeUrl, MsgSettleDevshardEscrow],
];

export function devshardRegistry(): Registry {
  return new Registry([...defaultRegistryTypes, ...devshardTypes]);
}
