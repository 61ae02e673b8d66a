/**
 * One inference in the session state and its canonical entry bytes (gonka 8a35022
 * devshard/types/domain.go `InferenceRecord`, `InferenceStatus`; devshard/state/hash.go
 * `marshalInferenceEntry`; devshard/types/bitmap.go `Bitmap128`; v5's record heights:
 * zpoken/gonka@86cff503 state/hash.go, state.proto fields 18/19).
 */
import { create, toBinary } from '@bufbuild/protobuf';
import { InferenceRecordProtoSchema } from './gen/devshard/v1/state_pb.js';

/** `InferenceStatus` (uint8, iota order). */
export enum InferenceStatus {
  Pending = 0,
  Started = 1,
  Finished = 2,
  Challenged = 3,
  Validated = 4,
  Invalidated = 5,
  TimedOut = 6,
}

export const STATUS_NAMES: Record<InferenceStatus, string> = {
  [InferenceStatus.Pending]: 'pending',
  [InferenceStatus.Started]: 'started',
  [InferenceStatus.Finished]: 'finished',
  [InferenceStatus.Challenged]: 'challenged',
  [InferenceStatus.Validated]: 'validated',
  [InferenceStatus.Invalidated]: 'invalidated',
  [InferenceStatus.TimedOut]: 'timed_out',
};

/**
 * A live record. Records are never mutated: a change makes a new object, so the entry bytes
 * cached per object stay valid and a rollback restores the old object.
 */
export interface InferenceRecord {
  readonly id: bigint;
  readonly status: InferenceStatus;
  readonly executorSlot: number;
  readonly model: string;
  readonly promptHash: Uint8Array;
  readonly responseHash: Uint8Array;
  readonly inputLength: bigint;
  readonly maxTokens: bigint;
  readonly inputTokens: bigint;
  readonly outputTokens: bigint;
  readonly reservedCost: bigint;
  readonly actualCost: bigint;
  readonly startedAt: bigint;
  readonly confirmedAt: bigint;
  /** v5: the Start's observed height when it was stamped (0 otherwise, and always under v2). */
  readonly startedAtHeight: bigint;
  /** v5: the ConfirmStart's observed height when it was stamped (0 otherwise, and always under v2). */
  readonly confirmedAtHeight: bigint;
  readonly votesValid: number;
  readonly votesInvalid: number;
  /** Bitmap128 of slots that validated or voted (bit i = slot i; slots >= 128 are ignored). */
  readonly validatedBy: bigint;
}

export const MAX_GROUP_SIZE = 128;

export const bitmapSet = (b: bigint, slot: number): bigint => (slot >= MAX_GROUP_SIZE ? b : b | (1n << BigInt(slot)));
export const bitmapIsSet = (b: bigint, slot: number): boolean => slot < MAX_GROUP_SIZE && ((b >> BigInt(slot)) & 1n) === 1n;

/** `Bitmap128.Bytes()`: two uint64 words, little-endian, always 16 bytes. */
export function bitmapBytes(b: bigint): Uint8Array {
  const out = new Uint8Array(16);
  const dv = new DataView(out.buffer);
  dv.setBigUint64(0, b & 0xffff_ffff_ffff_ffffn, true);
  dv.setBigUint64(8, (b >> 64n) & 0xffff_ffff_ffff_ffffn, true);
  return out;
}

const entryCache = new WeakMap<InferenceRecord, Uint8Array>();

/**
 * The canonical entry: deterministic proto InferenceRecordProto. `validated_by` is always 16 bytes,
 * so it is always written (never omitted as empty bytes). Cached per record object.
 */
export function inferenceEntry(r: InferenceRecord): Uint8Array {
  let e = entryCache.get(r);
  if (e === undefined) {
    e = toBinary(
      InferenceRecordProtoSchema,
      create(InferenceRecordProtoSchema, {
        inferenceId: r.id,
        status: r.status,
        executorSlot: r.executorSlot,
        model: r.model,
        promptHash: r.promptHash,
        responseHash: r.responseHash,
        inputLength: r.inputLength,
        maxTokens: r.maxTokens,
        inputTokens: r.inputTokens,
        outputTokens: r.outputTokens,
        reservedCost: r.reservedCost,
        actualCost: r.actualCost,
        startedAt: r.startedAt,
        confirmedAt: r.confirmedAt,
        // Zero under v2, and proto3 does not write zero: v2 entries keep their bytes.
        startedAtHeight: r.startedAtHeight,
        confirmedAtHeight: r.confirmedAtHeight,
        votesValid: r.votesValid,
        votesInvalid: r.votesInvalid,
        validatedBy: bitmapBytes(r.validatedBy),
      }),
    );
    entryCache.set(r, e);
  }
  return e;
}
