/** The Escrows page's rows: one per escrow the gateway holds (GET /v1/admin/devshards' views, trimmed), filtered by model and state. */
import type { GatewayPort } from '../gateway/port.js';

export interface EscrowRow {
  id: string;
  model: string;
  protocol_version: string | null;
  state: string;
  balance: string;
  usable_balance: string;
  nonce: number;
  in_flight: number;
  epoch: number;
  /** The chain prunes it (paying its deposit to its hosts) if still unsettled then; null once settled. */
  prune: { prune_epoch: number; settle_deadline_epoch: number; blocks_until_prune: number | null } | null;
  /** Past its settle window: can no longer be settled. */
  expired: boolean;
  hosts: string[];
  settled: boolean;
}

export async function escrowRows(gateway: GatewayPort, filter: { model?: string | undefined; state?: string | undefined }): Promise<{ object: 'list'; data: EscrowRow[]; models: string[]; states: string[] }> {
  const list = await gateway.devshardList();
  const all: EscrowRow[] = list.data.map((v) => {
    const x = v as typeof v & { protocol_version?: string; prune?: EscrowRow['prune'] };
    return {
      id: x.escrow_id,
      model: x.model_id ?? '',
      protocol_version: x.protocol_version ?? null,
      state: x.state,
      balance: String(x.balance),
      usable_balance: String(x.usable_balance),
      nonce: x.nonce,
      in_flight: x.in_flight,
      epoch: x.epoch_index ?? 0,
      prune: x.prune ?? null,
      expired: x.expired === true,
      hosts: x.slots.map((s) => s.host),
      settled: x.settled === true,
    };
  });
  const data = all.filter((r) => (filter.model === undefined || r.model === filter.model) && (filter.state === undefined || r.state === filter.state));
  return { object: 'list', data, models: [...new Set(all.map((r) => r.model))].sort(), states: [...new Set(all.map((r) => r.state))].sort() };
}
