/**
 * The /v1/status document, derived from the escrow pool and the settings projections (it holds
 * no state of its own, so it always equals a rebuild). Spec fields `runtimes`, `capacity.models`,
 * `active_requests`; in pool mode also `devshards`. Field shapes beyond those names are ours.
 */
import type { AccessMode, Amount, EscrowRole } from '../events/catalog.js';
import type { EscrowState } from '../machines/index.js';
import type { EscrowPoolProjection } from './escrow-pool.js';
import type { SettingsProjection } from './settings.js';

export interface StatusDocument {
  status: 'ok' | 'disabled';
  /** One runtime per served model: the escrow pool behind it. */
  runtimes: { model: string; mode: 'pool'; escrows: number; routable: number }[];
  capacity: {
    models: Record<string, { active: number; routable_devshards: string[]; access_mode: AccessMode; in_flight: number }>;
  };
  active_requests: number;
  devshards: {
    escrow_id: string;
    model: string;
    role: EscrowRole;
    state: EscrowState;
    routable: boolean;
    nonce: number;
    balance: Amount;
    reserved: Amount;
    in_flight: number;
  }[];
}

/** The status projection (a view over pool + settings). */
export class StatusProjection {
  constructor(
    private readonly pool: EscrowPoolProjection,
    private readonly settings: SettingsProjection,
  ) {}

  /** Nothing to fold: pool and settings are applied by the aggregate. */
  apply(): void {}

  snapshot(): StatusDocument {
    const escrows = this.pool.all().filter((e) => e.state !== 'removed' && e.model);
    const models = [...new Set([...escrows.map((e) => e.model), ...this.settings.accessModels()])].sort();
    const capacity: StatusDocument['capacity']['models'] = {};
    const runtimes: StatusDocument['runtimes'] = [];
    let activeRequests = 0;
    for (const model of models) {
      const mine = escrows.filter((e) => e.model === model);
      const inFlight = mine.reduce((n, e) => n + e.inFlight, 0);
      activeRequests += inFlight;
      const routable = this.pool.routableOf(model).map((e) => e.escrowId).sort();
      capacity[model] = {
        active: mine.filter((e) => e.state === 'active').length,
        routable_devshards: routable,
        access_mode: this.settings.accessMode(model),
        in_flight: inFlight,
      };
      runtimes.push({ model, mode: 'pool', escrows: mine.length, routable: routable.length });
    }
    return {
      status: this.settings.disabledSnapshot().value === 'on' ? 'disabled' : 'ok',
      runtimes,
      capacity: { models: capacity },
      active_requests: activeRequests,
      devshards: escrows.map((e) => ({
        escrow_id: e.escrowId,
        model: e.model,
        role: e.role,
        state: e.state,
        routable: e.state === 'active',
        nonce: e.nonce,
        balance: e.balance,
        reserved: e.reserved,
        in_flight: e.inFlight,
      })),
    };
  }
}
