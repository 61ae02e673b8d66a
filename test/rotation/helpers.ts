/**
 * A test gateway on a fast devnet (50 ms blocks, short epochs) with the rotation task and the
 * depletion check attached, plus chat load and log helpers.
 */
import { upcast, type RecordedCatalogEvent } from '../../src/events/catalog.js';
import type { DepletionCheck, RotationTask } from '../../src/gateway/rotation/index.js';
import { MODEL, startTestGateway, type TestGateway, type TestGatewayOptions } from '../helpers/gateway.js';

export { MODEL };

export interface RotationGateway extends Omit<TestGateway, 'restart'> {
  rotation: RotationTask;
  depletion: DepletionCheck;
  restart(): Promise<RotationGateway>;
}

export const FAST_CHAIN = { DEVNET_BLOCK_TIME_MS: '50', DEVNET_EPOCH_BLOCKS: '60', DEVNET_POC_BLOCKS: '6' };

/** The gateway's own rotation and depletion tasks, exposed for tests. */
export function attach(gw: TestGateway): RotationGateway {
  const r: RotationGateway = {
    ...gw,
    rotation: gw.tasks.rotation,
    depletion: gw.tasks.depletion,
    async restart() {
      return attach(await gw.restart());
    },
  };
  return r;
}

export async function startRotationGateway(opts: TestGatewayOptions = {}): Promise<RotationGateway> {
  const gw = await startTestGateway({
    ...opts,
    env: { GATEWAY_ROTATION_INTERVAL_MS: '100', GATEWAY_BALANCE_CHECK_INTERVAL_MS: '300', ...FAST_CHAIN, ...opts.env },
  });
  return attach(gw);
}

export async function enableRotation(gw: TestGateway, o: { temp_count?: number; target_count?: number; pre_poc_blocks?: number; amount?: string; enabled?: boolean } = {}) {
  const r = await gw.call('/v1/admin/settings', {
    body: {
      model_limits: [{ model_id: MODEL, access_mode: 'api_key' }],
      escrow_rotation: {
        enabled: o.enabled ?? true,
        pre_poc_blocks: o.pre_poc_blocks ?? 20,
        models: [{ model_id: MODEL, temp_count: o.temp_count ?? 1, target_count: o.target_count ?? 1, amount: o.amount ?? '1000000000', private_key_env: 'DEVSHARD_PRIVATE_KEY' }],
      },
    },
  });
  if (r.status !== 200) throw new Error(`settings: ${r.status} ${r.text}`);
  (gw as RotationGateway).rotation?.reconfigure();
}

export function events(gw: TestGateway): RecordedCatalogEvent[] {
  return [...gw.store.readAll(0)].map((r) => upcast(r)).filter((e): e is RecordedCatalogEvent => e !== null);
}

export const ofType = <K extends RecordedCatalogEvent['type']>(gw: TestGateway, type: K) =>
  events(gw).filter((e): e is Extract<RecordedCatalogEvent, { type: K }> => e.type === type);

export async function waitFor(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000, everyMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Continuous chat from `workers` clients; `stop()` answers the statuses seen. */
export function chatLoad(gw: TestGateway, workers = 4, maxTokens = 8) {
  let running = true;
  const statuses: number[] = [];
  const failures: string[] = [];
  const loops = Array.from({ length: workers }, async (_, w) => {
    while (running) {
      const r = await gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: `worker ${w} says hi` }], max_tokens: maxTokens } });
      statuses.push(r.status);
      if (r.status !== 200) failures.push(`${r.status} ${r.text.slice(0, 200)}`);
    }
  });
  return {
    statuses,
    failures,
    async stop() {
      running = false;
      await Promise.all(loops);
      return { total: statuses.length, failures };
    },
  };
}
