/**
 * GET /v1/debug/rotation in devshardctl's shape (gonka devshard/cmd/devshardctl gateway.go
 * handleDebugRotation) with ours beside it: `latest` is devshardctl's array of the newest rotation
 * statuses, one per model and step (gateway_store.go GatewayRotationStatus, the last 100); our
 * per-model document is `latest_by_model`; `enabled` is at the top level as the spec names it,
 * and in `settings`.
 */
import type { EscrowRole } from '../../events/catalog.js';
import type { GatewayContext } from '../context.js';
import { cycleOutcome, RESTING_STAGES, type RotationHistoryEntry } from '../workers/rotation/debug.js';
import { rotationDebugDocument, type RotationDebugDocument } from '../workers/rotation/index.js';

/** How many statuses `latest` lists (devshardctl: LoadRotationStatuses(100)). */
export const LATEST_STATUSES = 100;

/** A model's current cycle: from which epoch its entries belong to it, and how it stands. */
export interface CurrentCycle {
  cycleEpoch: number | null;
  outcome: ReturnType<typeof cycleOutcome>;
}

/** devshardctl's GatewayRotationStatus (gateway_store.go) of one model and step. */
export interface RotationStatus {
  model_id: string;
  stage: string;
  epoch: number;
  role?: EscrowRole;
  target_count: number;
  existing_count: number;
  created_count: number;
  promoted_count: number;
  settled_count: number;
  settle_failed_count: number;
  create_error?: string;
  completed: boolean;
  failed_step?: string;
  failure_reason?: string | null;
  updated_at: string;
}

/** GET /v1/debug/rotation: our rotation debug document in devshardctl's shape (module comment). */
export interface RotationDebugAnswer extends Omit<RotationDebugDocument, 'latest' | 'chain'> {
  chain: RotationDebugDocument['chain'] & {
    epoch_switch_block_height: number | null;
    blocks_to_epoch_switch: number | null;
  };
  /** devshardctl's newest statuses, one per model and step. */
  latest: RotationStatus[];
  /** Ours: per model its stage, counts and errors. */
  latest_by_model: RotationDebugDocument['latest'];
}

/** devshardctl's GatewayRotationStatus of one model and step: the last history entry of each, newest first. */
export function rotationStatuses(history: readonly RotationHistoryEntry[], current: (model: string) => CurrentCycle | undefined = () => undefined): RotationStatus[] {
  const last = new Map<string, RotationHistoryEntry>();
  for (const e of history) {
    const key = JSON.stringify([e.model, e.stage, e.epoch]);
    last.delete(key); // re-inserted: the map's order is the order of each step's last entry
    last.set(key, e);
  }
  return [...last.values()]
    .reverse()
    .slice(0, LATEST_STATUSES)
    .map((e) => {
      // An entry of the model's current cycle whose creates failed (or wait on the configuration) is not completed.
      const cur = current(e.model);
      const failure = cur && cur.cycleEpoch !== null && e.epoch !== null && e.epoch >= cur.cycleEpoch ? cur.outcome.failure : null;
      return {
      model_id: e.model,
      stage: e.stage,
      epoch: e.epoch ?? 0,
      ...(e.role ? { role: e.role } : {}),
      target_count: e.target,
      existing_count: e.existing,
      created_count: e.created,
      promoted_count: e.promoted,
      settled_count: e.settled,
      settle_failed_count: e.settle_failed,
      ...(e.last_error ? { create_error: e.last_error.message } : {}),
      completed: RESTING_STAGES.has(e.stage) && failure === null,
      ...(failure ? { failed_step: failure.step, failure_reason: failure.reason } : {}),
      updated_at: e.time,
    };
    });
}

export async function rotationDebugAnswer(ctx: GatewayContext): Promise<RotationDebugAnswer> {
  const { latest, ...d } = await rotationDebugDocument(ctx);
  return {
    ...d,
    chain: {
      ...d.chain,
      // devshardctl's names for the same two numbers.
      epoch_switch_block_height: d.chain.next_boundary_height,
      blocks_to_epoch_switch: d.chain.blocks_until_boundary,
    },
    latest: rotationStatuses(d.history, (model) => {
      const c = ctx.projections.rotation.rotation(model).context;
      return { cycleEpoch: c.cycleEpoch ?? null, outcome: cycleOutcome(c, ctx.projections.rotation.perModel()[model]?.stage ?? 'idle') };
    }),
    latest_by_model: latest,
  };
}
