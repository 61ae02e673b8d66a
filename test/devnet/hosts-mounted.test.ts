import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { CREATOR_KEYS, MODEL, startDevnetAndClient, stopDevnetAndClient } from '../chain/helpers.js';

describe('simulated hosts mounted on the devnet', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient()));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  // The chain's acceptance of the hosts' settlement signatures: test/chain/settle-escrow.test.ts and
  // test/gateway/devshard-protocol-settle.e2e.test.ts.
  it("serve the devshard host protocol at the escrow's slot URLs (the chain's inference_url), and nothing of the removed legacy routes", async () => {
    const { escrowId, escrow } = await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    expect(escrow.slots.length).toBe(devnet.hosts.length);
    for (const slot of escrow.slots) {
      const res = await fetch(`${slot.url}/v1/devshard/sessions/${escrowId}/mempool`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ txs: [] });
      const legacy = await fetch(`${slot.url}/devshard/v1/sessions/${escrowId}/sign`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(legacy.status).toBe(404);
    }
  });
});
