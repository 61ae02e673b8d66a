/**
 * Issue 27: a host's URL is its participant's inference_url, cached by the chain client. When a
 * host call fails as unreachable, the gateway forgets the cached URL and reads the participant again,
 * so a host that moved is called at its new URL from the next request on.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('participant URL refresh after an unreachable host', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  });
  afterAll(() => disposeTestGateway(gw));

  const chat = () => gw.call('/v1/chat/completions', { body: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 } });

  it('a slot whose host moved fails once, then is called at the participant\'s new inference_url', async () => {
    const devnet = gw.devnet!;
    const host0 = devnet.hosts[0]!;
    const mount = `${devnet.url}/hosts/0`;
    // Host 0 is registered at an address where nothing listens (it moved before the escrow was read).
    devnet.chain.participantUrls[host0.address] = 'http://127.0.0.1:9/hosts/0';
    const id = await createEscrowViaApi(gw);
    const recorded = (await gw.call(`/v1/admin/devshards/${id}`)).json.slots as { slot_id: number; url: string }[];
    expect(recorded[0]!.url).toBe('http://127.0.0.1:9/hosts/0');
    // The participant now names where host 0 really is; the chain client still has the old URL cached.
    devnet.chain.participantUrls[host0.address] = mount.replace('127.0.0.1', 'localhost');

    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push((await chat()).status);
    // Exactly one request went to the old address (the first on slot 0); every later one is served.
    expect(statuses.filter((s) => s !== 200)).toEqual([502]);
    const refreshed = gw.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => String(l.msg).startsWith('host_url_refreshed'));
    expect(refreshed).toEqual([expect.objectContaining({ escrow_id: id, host: host0.address, from: 'http://127.0.0.1:9/hosts/0', to: mount.replace('127.0.0.1', 'localhost') })]);
  }, 60_000);
});
