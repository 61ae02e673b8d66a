/**
 * An address holding several slots (gonka 8a35022 devshard/host/host.go: `slotIDs`, `PrimarySlot`,
 * `signIfAccepted` stores the state signature under every slot the host holds; the keeper counts
 * quorum per signature entry), and a request sent to a host that is not the executor.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inferenceRequestJson } from '../../src/network/devshard/request-body.js';
import { buildSettlement, InferenceStatus, settlementSignatureValid } from '../../src/protocol/index.js';
import { MODEL, ProtocolClient, startTestNet, type TestNet } from './host-protocol-client.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `slot question ${i}` }], max_tokens: 16, ...extra });

describe('simulated hosts: one address, several slots', () => {
  let net: TestNet;
  let client: ProtocolClient;

  beforeAll(async () => {
    net = await startTestNet({ hosts: 2, slotsOf: [0, 1, 0] });
    client = new ProtocolClient(net);
  });
  afterAll(async () => net.close());

  it('executes for each of its slots and signs once per slot held', async () => {
    for (let i = 1; i <= 5; i++) {
      const a = await client.infer(chat(i, { stream: i % 2 === 1 }));
      expect(a.status, a.text).toBe(200);
      expect(a.host).toBe([0, 1, 0][i % 3]);
      expect(a.receipt!.receipt).toBeDefined();
    }
    for (let id = 1n; id <= 4n; id++) expect(client.replica.inference(id)!.status).toBe(InferenceStatus.Finished);

    // a payload sent to a host that is not the executor: receipt without executor receipt, no output
    const nonce = client.replica.latestNonce;
    const notExecutor = client.executorHost(nonce) === 0 ? 1 : 0;
    const prompt = new TextEncoder().encode(JSON.stringify(chat(5, { stream: true })));
    const rec = client.replica.inference(nonce)!;
    const body = inferenceRequestJson(client.catchUp(notExecutor), nonce, { prompt, model: MODEL, inputLength: rec.inputLength, maxTokens: rec.maxTokens, startedAt: rec.startedAt });
    const r = await client.post(notExecutor, 'chat/completions', body);
    const b = client.absorb(notExecutor, r.status, r.text);
    expect(b.status).toBe(200);
    expect(b.receipt!.receipt).toBeUndefined();
    expect(b.output).toEqual([]);
    expect(b.events.map((e) => e.kind)).toEqual(['receipt', 'meta']);

    const s = await client.finalize();
    expect(client.mismatches).toEqual([]);
    const settlement = buildSettlement(client.replica, s);
    const h0 = (await client.get(0, `signatures?nonce=${s}`)).json as { signatures: Record<string, string> };
    const h1 = (await client.get(1, `signatures?nonce=${s}`)).json as { signatures: Record<string, string> };
    expect(Object.keys(h0.signatures)).toEqual(['0', '2']);
    expect(Object.keys(h1.signatures)).toEqual(['1']);
    const all = { ...h0.signatures, ...h1.signatures };
    for (const [slot, sig] of Object.entries(all)) {
      expect(settlementSignatureValid(settlement, net.escrow.slots[Number(slot)]!.host, new Uint8Array(Buffer.from(sig, 'base64')))).toBe(true);
    }
    // voter slot of host 0 is its lowest slot
    expect(net.sim.protocol.peek(0, '42')!.primarySlot).toBe(0);
  });
});
