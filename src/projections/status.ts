/**
 * The /v1/status document, derived from the escrow pool and the settings projections (it holds
 * no state of its own, so it always equals a rebuild). Spec fields `runtimes`, `capacity.models`,
 * `active_requests`, and `devshards`. Where devshardctl (gonka devshard/cmd/devshardctl) serves a
 * field of the same name, it has devshardctl's type: `runtimes` is an integer (the number of
 * devshards loaded, gateway.go handlePooledStatus), `capacity.models[m].routable_devshards` an
 * integer (gatewayModelCapacityStatus); our richer forms are `model_runtimes` and
 * `routable_devshard_ids`. The route (src/http/routes/status.ts) adds what needs the chain's token
 * price or the limiter.
 */
import type { AccessMode, Amount, EscrowRole } from '../events/catalog.js';
import type { EscrowState } from '../machines/index.js';
import type { EscrowPoolProjection } from './escrow-pool.js';
import type { SettingsProjection } from './settings.js';

export interface StatusDocument {
  status: 'ok' | 'disabled';
  /** devshardctl's `runtimes`: how many devshards are loaded (one runtime each there). */
  runtimes: number;
  /** One runtime per served model: the escrow pool behind it. */
  model_runtimes: { model: string; mode: 'pool'; escrows: number; routable: number }[];
  capacity: {
    models: Record<
      string,
      {
        active: number;
        routable_devshard_ids: string[];
        access_mode: AccessMode;
        in_flight: number;
        /** devshardctl gatewayModelCapacityStatus members. */
        active_devshards: number;
        routable_devshards: number;
        routable: boolean;
        access_enabled: boolean;
      }
    >;
  };
  active_requests: number;
  devshards: {
    /** devshardctl runtimeStatus (gateway.go): id, model, active, phase, nonce, balance (a number), active_requests, requests_blocked, block_reason. */
    id: string;
    model: string;
    active: boolean;
    phase?: DevshardPhase;
    nonce: number;
    balance: number;
    active_requests: number;
    /** Reserved prompt + max tokens: our reserved amount at the token price (0 when no price is given). */
    reserved_tokens: number;
    requests_blocked: boolean;
    block_reason?: string;
    /** Ours: the same escrow in our words; `balance_exact` is the balance as an exact decimal string. */
    escrow_id: string;
    role: EscrowRole;
    state: EscrowState;
    routable: boolean;
    balance_exact: Amount;
    reserved: Amount;
    in_flight: number;
  }[];
}

/** devshardctl's session phases (proxy.go handleStatus): before finalize, and once settlement data exists. */
export type DevshardPhase = 'active' | 'settlement';

/** Our escrow state in devshardctl's phase words; undefined before the escrow exists on chain. */
export function devshardPhase(state: EscrowState): DevshardPhase | undefined {
  switch (state) {
    case 'none':
    case 'creating':
    case 'createFailed':
      return undefined;
    case 'finalized':
    case 'settleDeferred':
    case 'settling':
    case 'settled':
    case 'removed':
      return 'settlement';
    default:
      return 'active';
  }
}

/** Why a devshard takes no new chat (devshardctl's requests_blocked / block_reason), or undefined. */
export function blockReason(state: EscrowState): string | undefined {
  return state === 'active' ? undefined : state === 'routingStopped' ? 'routing_stop' : state;
}

/** The status projection (a view over pool + settings). */
export class StatusProjection {
  constructor(
    private readonly pool: EscrowPoolProjection,
    private readonly settings: SettingsProjection,
  ) {}

  /** Nothing to fold: pool and settings are applied by the aggregate. */
  apply(): void {}

  /** `tokenPrice` (the chain's, smallest coin unit per token) turns reserved amounts into reserved_tokens. */
  snapshot(tokenPrice = 0n): StatusDocument {
    const escrows = this.pool.all().filter((e) => e.state !== 'removed' && e.model);
    const models = [...new Set([...escrows.map((e) => e.model), ...this.settings.accessModels()])].sort();
    const capacity: StatusDocument['capacity']['models'] = {};
    const runtimes: StatusDocument['model_runtimes'] = [];
    let activeRequests = 0;
    for (const model of models) {
      const mine = escrows.filter((e) => e.model === model);
      const inFlight = mine.reduce((n, e) => n + e.inFlight, 0);
      activeRequests += inFlight;
      const routable = this.pool.routableOf(model).map((e) => e.escrowId).sort();
      const active = mine.filter((e) => e.state === 'active').length;
      capacity[model] = {
        active,
        routable_devshard_ids: routable,
        access_mode: this.settings.accessMode(model),
        in_flight: inFlight,
        active_devshards: active,
        routable_devshards: routable.length,
        routable: routable.length > 0,
        // Every access mode lets someone in (admin_only: the admin key); none turns a model off.
        access_enabled: true,
      };
      runtimes.push({ model, mode: 'pool', escrows: mine.length, routable: routable.length });
    }
    return {
      status: this.settings.disabledSnapshot().value === 'on' ? 'disabled' : 'ok',
      runtimes: escrows.length,
      model_runtimes: runtimes,
      capacity: { models: capacity },
      active_requests: activeRequests,
      devshards: escrows.map((e) => {
        const phase = devshardPhase(e.state);
        const blocked = blockReason(e.state);
        return {
          id: e.escrowId,
          model: e.model,
          active: e.state === 'active',
          ...(phase ? { phase } : {}),
          nonce: e.nonce,
          balance: Number(e.balance),
          active_requests: e.inFlight,
          reserved_tokens: tokenPrice > 0n ? Number(BigInt(e.reserved) / tokenPrice) : 0,
          requests_blocked: blocked !== undefined,
          ...(blocked ? { block_reason: blocked } : {}),
          escrow_id: e.escrowId,
          role: e.role,
          state: e.state,
          routable: e.state === 'active',
          balance_exact: e.balance,
          reserved: e.reserved,
          in_flight: e.inFlight,
        };
      }),
    };
  }
}
