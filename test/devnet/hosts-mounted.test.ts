import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import { HOST_VERSION_NAMES, hostRules } from '../../src/devnet/hosts/protocol/host-versions.js';
import { CREATOR_KEYS, MODEL, startDevnetAndClient, stopDevnetAndClient } from '../chain/helpers.js';

describe('simulated hosts mounted on the devnet', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient()));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  // The chain's acceptance of the hosts' settlement signatures: test/chain/settle-escrow.test.ts and
  // test/gateway/devshard-protocol-settle.e2e.test.ts.
  it("serve the devshard host protocol at the escrow's slot URLs (the chain's inference_url) under every version's route, and nothing of the removed legacy routes", async () => {
    const { escrowId, escrow } = await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    expect(escrow.slots.length).toBe(devnet.hosts.length);
    // DEVNET_HOST_VERSIONS, by default every version the hosts serve (ours and v5)
    const versions = devnet.simulatedHosts.versions;
    if (process.env.DEVNET_HOST_VERSIONS === undefined) expect(versions).toEqual(HOST_VERSION_NAMES);
    for (const slot of escrow.slots) {
      for (const version of versions) {
        const res = await fetch(`${slot.url}/devshard/${version}/sessions/${escrowId}/mempool`);
        // A v5 host serves GETs only for a session it has bound (Z5 withSession); older ones open it.
        if (hostRules(version) === 'v5') {
          expect([res.status, await res.text()]).toEqual([404, '{"message":"session not found"}']);
          continue;
        }
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ txs: [] });
      }
      // the host API's embedded /v1/devshard is gone (410; exact answer: host-versions.test.ts), unless DEVNET_LEGACY_ROUTE keeps it
      expect((await fetch(`${slot.url}/v1/devshard/sessions/${escrowId}/mempool`)).status).toBe(devnet.simulatedHosts.legacyRoute ? 200 : 410);
      const legacy = await fetch(`${slot.url}/devshard/v1/sessions/${escrowId}/sign`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(legacy.status).toBe(404);
    }
  });
});
