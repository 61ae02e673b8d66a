import { Secp256k1, Secp256k1Signature, sha256 } from '@cosmjs/crypto';
import { fromHex } from '@cosmjs/encoding';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { HostStat } from '../../src/chain/port.js';
import { collectSignatures, collectSignaturesDetailed } from '../../src/network/collect-signatures.js';
import { createHostTransport } from '../../src/network/host-transport.js';
import { HostError, type ChatResult, type Usage } from '../../src/network/port.js';
import { createRequestSigner } from '../../src/network/signature.js';
import { HostLedger } from '../../src/devnet/hosts/ledger.js';
import { chatBody, clearFaults, startNet, TOKEN_PRICE, type Net } from './fixtures.js';

let net: Net;
beforeAll(async () => {
  net = await startNet();
});
afterAll(async () => {
  await net.close();
});

const STATE_ROOT = 'ab'.repeat(32);

/** Serves a mix of requests through the transport and bills them the way the gateway will: usage x price per slot. */
async function serveAndBill(): Promise<Map<number, bigint>> {
  const transport = createHostTransport({ stallTimeoutMs: 300 });
  const signer = createRequestSigner(net.creator.privateKeyHex);
  const billed = new Map<number, bigint>();
  const bill = (slot: number, u: Usage | undefined) => billed.set(slot, (billed.get(slot) ?? 0n) + BigInt(u?.total_tokens ?? 0) * TOKEN_PRICE);
  for (let nonce = 0; nonce < 9; nonce++) {
    const stream = nonce % 2 === 1;
    if (nonce === 5) net.faults.stallAfterChunks = 4; // one stream cut short by a stall
    const body = chatBody({ stream, messages: [{ role: 'user', content: `request number ${nonce}` }] });
    const r: ChatResult = await transport.chat({ escrowId: '1', nonce, hostUrl: net.hostUrl(nonce % 3), body, signer, signal: new AbortController().signal });
    if (r.kind === 'completion') bill(nonce % 3, r.completion.usage);
    else {
      try {
        for await (const _ of r.chunks) void _;
        bill(nonce % 3, r.usage());
      } catch (err) {
        bill(nonce % 3, (err as HostError).usageSoFar);
      }
    }
    clearFaults(net.faults);
  }
  await transport.close();
  // Let the stalled host notice the closed connection and record the request it cut short.
  for (let i = 0; i < 100 && !net.sim.served('1').some((t) => t.interrupted > 0); i++) await new Promise((r) => setTimeout(r, 20));
  return billed;
}

const statsOf = (billed: Map<number, bigint>): HostStat[] =>
  [...billed].map(([slotId, cost]) => ({ slotId, cost, missed: 0, invalid: 0, requests: 3 }));

const slots = () => net.hosts.map((h) => ({ slotId: h.index, url: net.hostUrl(h.index) }));

describe('settlement signatures', () => {
  let billed: Map<number, bigint>;
  beforeAll(async () => {
    billed = await serveAndBill();
  });

  it('what the gateway billed from usage equals what each host tallied', () => {
    for (const t of net.sim.served('1')) {
      expect(billed.get(t.slotId)).toBe(t.cost);
    }
    expect(net.sim.served('1').map((t) => t.slotId)).toEqual([0, 1, 2]);
  });

  it('every host signs a correct claim; the signatures verify with the host keys over sha256(state root bytes)', async () => {
    const sigs = await collectSignatures(slots(), '1', { stateRoot: STATE_ROOT, nonce: 8, hostStats: statsOf(billed) });
    expect(sigs.map((s) => s.slotId).sort()).toEqual([0, 1, 2]);
    for (const s of sigs) {
      const raw = Buffer.from(s.signature, 'base64');
      expect(raw.length).toBe(64);
      const ok = Secp256k1.verifySignature(Secp256k1Signature.fromFixedLength(raw), sha256(fromHex(STATE_ROOT)), net.hosts[s.slotId]!.pubKey);
      expect(ok).toBe(true);
    }
  });

  it('a host refuses to sign an over- or under-statement of its own slot, and says why', async () => {
    for (const delta of [1n, -1n]) {
      const claim = new Map(billed);
      claim.set(0, claim.get(0)! + delta);
      const { signatures, failures } = await collectSignaturesDetailed(slots(), '1', { stateRoot: STATE_ROOT, nonce: 8, hostStats: statsOf(claim) });
      expect(signatures.map((s) => s.slotId).sort()).toEqual([1, 2]);
      expect(failures).toHaveLength(1);
      expect(failures[0]).toMatchObject({ slotId: 0, status: 409 });
      expect(failures[0]!.message).toMatch(delta > 0n ? /over-states/ : /under-states/);
    }
  });

  it('a host whose slot is missing from the claim, or that is unreachable, gives no signature', async () => {
    const stats = statsOf(billed).filter((s) => s.slotId !== 2);
    const hosts = [...slots(), { slotId: 3, url: 'http://127.0.0.1:9/hosts/3' }];
    const { signatures, failures } = await collectSignaturesDetailed(hosts, '1', { stateRoot: STATE_ROOT, nonce: 8, hostStats: stats });
    expect(signatures.map((s) => s.slotId).sort()).toEqual([0, 1]);
    expect(failures.map((f) => f.slotId).sort()).toEqual([2, 3]);
  });

  it('a host ledger survives a devnet restart through its snapshot', () => {
    const saved = JSON.parse(JSON.stringify(net.sim.snapshot())) as ReturnType<typeof net.sim.snapshot>;
    for (const h of net.hosts) {
      expect(HostLedger.from(saved[h.index]).tallies('1')).toEqual(net.sim.ledger(h.index)!.tallies('1'));
    }
  });
});
