import { sha256 } from '@cosmjs/crypto';
import { toHex, toUtf8 } from '@cosmjs/encoding';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CosmosChainClient } from '../../src/chain/cosmos-client.js';
import type { Devnet } from '../../src/devnet/chain/index.js';
import type { Settlement } from '../../src/chain/port.js';
import { CREATOR_KEYS, MODEL, startDevnetAndClient, stopDevnetAndClient } from '../chain/helpers.js';

describe('simulated hosts mounted on the devnet', () => {
  let devnet: Devnet;
  let client: CosmosChainClient;
  beforeAll(async () => ({ devnet, client } = await startDevnetAndClient()));
  afterAll(() => stopDevnetAndClient({ devnet, client }));

  // LEGACY (the invented `/sign` route and its "v1" settlement; removed with the legacy transport).
  it('sign the state root at their slot URLs, and the chain accepts those signatures (legacy v1)', async () => {
    const { escrowId, escrow } = await client.createEscrow(CREATOR_KEYS[0]!, 1_000_000_000n, MODEL);
    const stateRoot = toHex(sha256(toUtf8(`unused escrow ${escrowId}`)));
    const hostStats = escrow.slots.map((s) => ({ slot_id: s.slotId, missed: 0, invalid: 0, cost: '0' }));
    const signatures = await Promise.all(
      escrow.slots.map(async (slot) => {
        const res = await fetch(`${slot.url}/devshard/v1/sessions/${escrowId}/sign`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ state_root: stateRoot, nonce: 0, slot_id: slot.slotId, host_stats: hostStats }),
        });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { slot_id: number; signature: string };
        return { slotId: body.slot_id, signature: body.signature };
      }),
    );
    const settlement: Settlement = {
      escrowId,
      nonce: 0,
      stateRoot,
      restHash: toHex(sha256(toUtf8('rest'))),
      hostStats: escrow.slots.map((s) => ({ slotId: s.slotId, missed: 0, invalid: 0, cost: 0n, requests: 0 })),
      signatures,
      fees: 0n,
      version: 1,
    };
    const { refund } = await client.settleEscrow(CREATOR_KEYS[0]!, settlement);
    expect(refund).toBe(1_000_000_000n);
    expect((await client.escrow(escrowId))?.settled).toBe(true);
  });
});
