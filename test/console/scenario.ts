/**
 * The console tests' gateway: the embedded devnet over the devshard protocol, an escrow that served
 * chats and was finalized and settled, a second escrow still serving, and a rotation whose creates
 * the chain refuses (an amount beyond the creator's funds), so every page has something to show.
 */
import { filter, firstValueFrom } from 'rxjs';
import { createEscrowViaApi, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

export { MODEL };

export interface ConsoleScenario {
  gw: TestGateway;
  /** Served chats, finalized, settled. */
  settled: string;
  /** Still active: takes the live chat. */
  serving: string;
  /** The settled escrow's chats: x-request-id and completion id of each. */
  requests: { requestId: string; completionId: string }[];
}

export const chat = (gw: TestGateway, text: string) => gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: text }], max_tokens: 16 } });

export async function startConsoleScenario(): Promise<ConsoleScenario> {
  const gw = await startTestGateway({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard', GATEWAY_ROTATION_INTERVAL_MS: '100' } });
  // Client keys may chat with the model.
  const access = await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
  if (access.status !== 200) throw new Error(`settings: ${access.status} ${access.text}`);
  const settled = await createEscrowViaApi(gw, '1000000000');
  const requests: ConsoleScenario['requests'] = [];
  for (let i = 0; i < 3; i++) {
    const r = await chat(gw, `console question ${i}`);
    if (r.status !== 200) throw new Error(`chat: ${r.status} ${r.text}\n${gw.logs.filter((l) => l.includes('"err"')).join('\n').slice(0, 3000)}`);
    requests.push({ requestId: r.headers.get('x-request-id')!, completionId: r.json.id });
  }
  const f = await gw.call(`/devshard/${settled}/v1/finalize`, { method: 'POST' });
  if (f.status !== 200) throw new Error(`finalize: ${f.status} ${f.text}`);
  const s = await gw.call(`/v1/admin/devshards/${settled}/settle`, { body: {} });
  if (s.status !== 200) throw new Error(`settle: ${s.status} ${s.text}`);
  const serving = await createEscrowViaApi(gw, '1000000000');
  // A rotation the chain's rules refuse: its deposit is beyond what the creator holds.
  const failed = firstValueFrom(gw.store.subscribe(gw.store.lastPosition()).pipe(filter((r) => r.type === 'RotationFailed')));
  const rot = await gw.call('/v1/admin/settings', {
    body: { escrow_rotation: { enabled: true, pre_poc_blocks: 600, models: [{ model_id: MODEL, temp_count: 1, target_count: 1, amount: '100000000000000', private_key_env: 'DEVSHARD_PRIVATE_KEY' }] } },
  });
  if (rot.status !== 200) throw new Error(`rotation settings: ${rot.status} ${rot.text}`);
  gw.tasks.rotation.reconfigure();
  await failed;
  return { gw, settled, serving, requests };
}
