/** Single or pool mode, from DEVSHARDS_JSON and DEVSHARD_ESCROW_ID (the spec's gateway modes). */
import type { ConfigIssue } from './errors.js';
import type { GatewayMode, InitialEscrow } from './gateway-config.js';

/**
 * DEVSHARDS_JSON accepted shape: a JSON array whose items are escrow ids (non-negative safe
 * integers or numeric strings) or objects `{"id"|"escrow_id": <id>, "model_id"?: string}`.
 * Duplicates are refused.
 */
export function parseMode(json: string | undefined, escrowId: string | undefined, issues: ConfigIssue[], warnings: string[]): GatewayMode {
  if (json === undefined) {
    if (escrowId === undefined) {
      issues.push({
        variable: 'DEVSHARD_ESCROW_ID',
        message: "no escrow configured: set DEVSHARDS_JSON='[]' for pool mode (escrows are then created or registered through the admin API), or DEVSHARD_ESCROW_ID=<id> for single-escrow mode",
      });
      return { kind: 'single', escrowId: '' };
    }
    if (!/^\d{1,20}$/.test(escrowId)) {
      issues.push({ variable: 'DEVSHARD_ESCROW_ID', message: `DEVSHARD_ESCROW_ID must be a numeric escrow id (got ${JSON.stringify(escrowId.slice(0, 40))})` });
      return { kind: 'single', escrowId: '' };
    }
    return { kind: 'single', escrowId: BigInt(escrowId).toString() };
  }
  const bad = (why: string): GatewayMode => {
    issues.push({ variable: 'DEVSHARDS_JSON', message: `DEVSHARDS_JSON ${why}; expected a JSON array like [] or [12, "13", {"id": 14, "model_id": "..."}]` });
    return { kind: 'pool', initialEscrows: [] };
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    return bad('is not valid JSON');
  }
  if (!Array.isArray(parsed)) return bad('is not an array');
  const initialEscrows: InitialEscrow[] = [];
  const seen = new Set<string>();
  for (const [i, item] of parsed.entries()) {
    let id: unknown = item;
    let modelId: unknown;
    if (item !== null && typeof item === 'object' && !Array.isArray(item)) {
      const o = item as Record<string, unknown>;
      id = o.id ?? o.escrow_id;
      modelId = o.model_id;
      if (modelId !== undefined && (typeof modelId !== 'string' || modelId === '')) return bad(`item ${i}: model_id must be a non-empty string`);
    }
    let canonical: string;
    if (typeof id === 'number' && Number.isSafeInteger(id) && id >= 0) canonical = String(id);
    else if (typeof id === 'string' && /^\d{1,20}$/.test(id)) canonical = BigInt(id).toString();
    else return bad(`item ${i}: not an escrow id`);
    if (seen.has(canonical)) return bad(`item ${i}: escrow ${canonical} listed twice`);
    seen.add(canonical);
    initialEscrows.push(modelId === undefined ? { escrowId: canonical } : { escrowId: canonical, modelId: modelId as string });
  }
  if (escrowId !== undefined) warnings.push('DEVSHARD_ESCROW_ID is ignored in pool mode (DEVSHARDS_JSON is set); list the escrow in DEVSHARDS_JSON instead.');
  return { kind: 'pool', initialEscrows };
}
