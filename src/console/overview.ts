/** The Overview page: kill switch, access mode per model, limits, capacity and rotation per model, from the in-memory projections behind the port. */
import type { GatewayPort } from '../gateway/port.js';

export async function overview(gateway: GatewayPort) {
  const settings = gateway.settings() as unknown as Record<string, unknown>;
  const status = gateway.status() as unknown as Record<string, unknown>;
  const rotation = (await gateway.rotationDebug()) as unknown as Record<string, unknown>;
  return {
    kill_switch: gateway.disabled(),
    models: gateway.servedModels(),
    settings,
    admission: gateway.admission(),
    status,
    rotation,
  };
}
