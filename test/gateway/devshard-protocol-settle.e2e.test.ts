/**
 * Finalize and settle over the real devshard protocol (DEVSHARD_HOST_PROTOCOL=devshard), end to end
 * on the embedded devnet: chat (streamed and not) → POST /devshard/{id}/v1/finalize (the protocol's
 * rounds, the hosts' `signatures?nonce=F`, answered with exactly the settlement file the chain CLI
 * reads) → settle (MsgSettleDevshardEscrow, the escrow's tag "v4.1"), which the devnet keeper accepts only because its
 * checks pass (k/devshard_settlement.go): the same settlement with one byte altered is refused with
 * the keeper's own text.
 */
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Settlement } from '../../src/chain/port.js';
import { settleRefusal } from '../../src/chain/prechecks.js';
import { protocolSettlementRefusal, toChainSettlement } from '../../src/gateway/escrows/settlement.js';
import { settlementTag, type SettlementData } from '../../src/events/catalog.js';
import { eventsFile } from '../../src/events/sqlite-store.js';
import { verifyLog } from '../../src/events/verify.js';
import { projectionsCheck } from '../../src/projections/verify-check.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `settle question ${i}` }], max_tokens: 24, ...extra });

const FILE_KEYS = ['escrow_id', 'version', 'state_root', 'nonce', 'fees', 'rest_hash', 'host_stats', 'signatures'];
const STAT_KEYS = ['slot_id', 'missed', 'invalid', 'cost', 'required_validations', 'completed_validations'];

describe('finalize and settle over the devshard protocol (DEVSHARD_HOST_PROTOCOL=devshard)', () => {
  let gw: TestGateway;
  let escrowId: string;
  let file: any;

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  const recorded = (): SettlementData => gw.ctx.engine.escrow(escrowId)!.context.settlement!;

  /** Sends a settle tx of `s` straight to the devnet (no gateway precheck): the keeper's outcome. */
  async function sendSettle(s: Settlement) {
    const tx = await gw.ctx.chain.prepareSettleEscrow(gw.keys.privateKey, s);
    return gw.ctx.chain.broadcast(tx);
  }

  it('chat streamed and not, then finalize answers exactly the settlement file, 65-byte signatures of every slot', async () => {
    for (let i = 0; i < 4; i++) {
      if (i % 2 === 0) {
        const res = await fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify(chat(i, { stream: true })),
        });
        expect(res.status).toBe(200);
        expect(await res.text()).toContain('data: [DONE]');
      } else {
        const r = await gw.call('/v1/chat/completions', { body: chat(i) });
        expect(r.status, r.text).toBe(200);
        expect(r.json.object).toBe('chat.completion');
      }
    }
    await gw.ctx.engine.idle();
    const r = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(r.status, r.text).toBe(200);
    file = r.json;
    expect(Object.keys(file)).toEqual(FILE_KEYS);
    expect(file.escrow_id).toBe(escrowId);
    // a new escrow speaks the newest version the devnet approves: v4.1, its roots hashing the tag "v4.1"
    expect(file.version).toBe('v4.1');
    // 4 chats, MsgFinalizeRound at 5, the Settlement phase at 5 + 3 slots
    expect(file.nonce).toBe(8);
    expect(typeof file.fees).toBe('number');
    expect(Buffer.from(file.state_root, 'base64')).toHaveLength(32);
    expect(Buffer.from(file.rest_hash, 'base64')).toHaveLength(32);
    expect(file.host_stats.map((h: any) => h.slot_id)).toEqual([0, 1, 2]);
    for (const h of file.host_stats) {
      expect(Object.keys(h)).toEqual(STAT_KEYS);
      for (const k of STAT_KEYS) expect(typeof h[k]).toBe('number');
    }
    expect(file.host_stats.reduce((n: number, h: any) => n + h.cost, 0)).toBeGreaterThan(0);
    expect(file.signatures.map((x: any) => x.slot_id)).toEqual([0, 1, 2]);
    for (const x of file.signatures) expect(Buffer.from(x.signature, 'base64')).toHaveLength(65);
    // GET finalize answers the same file; the log holds the settlement (hex roots, encoding 2, the tag "v4.1")
    const again = await gw.call(`/devshard/${escrowId}/v1/finalize`);
    expect(again.json).toEqual(file);
    expect(recorded()).toMatchObject({ escrowId, nonce: 8, version: 2, stateRootVersion: 'v4.1', stateRoot: Buffer.from(file.state_root, 'base64').toString('hex') });
    expect(protocolSettlementRefusal(recorded(), gw.ctx.engine.escrow(escrowId)!.context.slots)).toBeUndefined();
    // GWSETTLE_FINALIZE_FILE: the finalize answer as the file, and the escrow's slots and amount beside
    // it, for ../shared/tools/realnet's verify-finalize.mjs.
    const out = process.env.GWSETTLE_FINALIZE_FILE;
    if (out) {
      writeFileSync(out, r.text);
      const onChain = (await gw.ctx.chain.escrow(escrowId))!;
      writeFileSync(`${out}.escrow.json`, JSON.stringify({ slots: onChain.slots.map((x) => x.host), amount: onChain.amount.toString() }));
    }
  }, 60_000);

  const flip = (b: string, at: number, enc: 'hex' | 'base64') => {
    const bytes = Buffer.from(b, enc);
    bytes[at] ^= 0x01;
    return bytes.toString(enc);
  };

  const tampered: [string, (s: SettlementData) => SettlementData, RegExp][] = [
    ['one byte of a signature', (s) => ({ ...s, signatures: s.signatures.map((x) => (x.slotId === 1 ? { ...x, signature: flip(x.signature, 10, 'base64') } : x)) }), /^(signature for slot 1 recovered gonka1\w+, expected gonka1\w+|failed to recover address for slot 1: .+)$/],
    ['the rest_hash', (s) => ({ ...s, restHash: flip(s.restHash, 0, 'hex') }), /^state_root mismatch$/],
    ['a host stat', (s) => ({ ...s, hostStats: s.hostStats.map((h) => (h.slotId === 2 ? { ...h, cost: (BigInt(h.cost) + 1n).toString() } : h)) }), /^state_root mismatch$/],
    // v3 is approved by the devnet (DEVNET_APPROVED_VERSIONS default), but the hosts signed a root hashing "v4.1"
    ['the version (another approved tag)', (s) => ({ ...s, stateRootVersion: 'v3' }), /^state_root mismatch$/],
    ['the version (an unapproved tag)', (s) => ({ ...s, stateRootVersion: 'v9' }), /^settlement version "v9" is not listed in approved devshard versions$/],
  ];

  for (const [what, change, text] of tampered) {
    it(`the devnet keeper refuses the settlement with ${what} altered, with the keeper's text; the gateway's own check refuses it before any fee`, async () => {
      const bad = change(recorded());
      const outcome = await sendSettle(toChainSettlement(bad));
      expect(outcome.code).toBe(1);
      expect(outcome.codespace).toBe('undefined');
      const message = gw.ctx.chain.errorOf(outcome).message;
      expect(outcome.rawLog).toContain('failed to execute message; message index: 0: ');
      expect(outcome.rawLog.replace(/^.*message index: 0: /, '')).toMatch(text);
      expect(message.length).toBeGreaterThan(0);
      expect((await gw.ctx.chain.escrow(escrowId))!.settled).toBe(false);
      // what the gateway could have known: its checks of the recorded settlement say the same
      const approved = (await gw.ctx.chain.params()).approvedVersions;
      if (approved.includes(settlementTag(bad))) {
        const refusal = protocolSettlementRefusal(bad, gw.ctx.engine.escrow(escrowId)!.context.slots);
        expect(refusal?.detail.precheck).toBe(true);
        expect(refusal?.message).toMatch(/state_root mismatch|signature for slot 1 does not recover/);
      } else {
        const refusal = settleRefusal(await gw.ctx.chain.params(), { settler: gw.ctx.engine.escrow(escrowId)!.context.creator!, version: settlementTag(bad) });
        expect(refusal).toMatchObject({ kind: 'version_not_approved', detail: { precheck: true } });
        expect(refusal?.message).toContain(outcome.rawLog.replace(/^.*message index: 0: /, ''));
      }
    }, 30_000);
  }

  it('settle sends MsgSettleDevshardEscrow "v4.1"; the keeper pays each slot its cost plus its fee share, the remainder to the creator', async () => {
    const slots = gw.ctx.engine.escrow(escrowId)!.context.slots;
    const creator = gw.ctx.engine.escrow(escrowId)!.context.creator!;
    const deposit = BigInt((await gw.ctx.chain.escrow(escrowId))!.amount);
    const hosts = [...new Set(slots.map((s) => s.host))];
    const before = new Map(await Promise.all(hosts.map(async (h) => [h, await gw.ctx.chain.balance(h)] as const)));
    const creatorBefore = await gw.ctx.chain.balance(creator);
    const r = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ status: 'settled', settled: true, escrow_id: Number(escrowId) });
    const costs = file.host_stats.reduce((n: bigint, h: any) => n + BigInt(h.cost), 0n);
    const fees = BigInt(file.fees);
    expect(BigInt(r.json.total_payout)).toBe(costs + fees);
    expect(BigInt(r.json.fees)).toBe(fees);
    expect(BigInt(r.json.deposit)).toBe(deposit);
    expect(BigInt(r.json.total_payout) + BigInt(r.json.refund)).toBe(deposit);
    expect((await gw.ctx.chain.escrow(escrowId))!.settled).toBe(true);
    // each slot's host got its cost plus fees / n (the first fees % n entries one more)
    const n = BigInt(slots.length);
    const expected = new Map<string, bigint>();
    file.host_stats.forEach((h: any, i: number) => {
      const host = slots[h.slot_id]!.host;
      expected.set(host, (expected.get(host) ?? 0n) + BigInt(h.cost) + fees / n + (BigInt(i) < fees % n ? 1n : 0n));
    });
    for (const h of hosts) expect((await gw.ctx.chain.balance(h)) - before.get(h)!, h).toBe(expected.get(h) ?? 0n);
    // the creator got the remainder, less the fee of the settle tx it paid
    const fee = gw.ctx.chain.txFee?.().amount ?? 0n;
    expect((await gw.ctx.chain.balance(creator)) - creatorBefore).toBe(BigInt(r.json.refund) - fee);
    // the settlement's money is in the log
    const settled = (await gw.ctx.engine.readStream(`escrow-${escrowId}`)).find((x) => x.type === 'EscrowSettled');
    expect(settled?.data).toMatchObject({ totalPayout: (costs + fees).toString(), fees: fees.toString(), refund: r.json.refund });
    // settle again: already settled, the same money
    const again = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(again.json).toMatchObject({ status: 'settled', already: true, total_payout: r.json.total_payout, deposit: r.json.deposit });
    const v = await verifyLog(eventsFile(gw.storageDir), [projectionsCheck()]);
    expect(v.ok, JSON.stringify(v)).toBe(true);
  }, 60_000);
});

describe('settle of an escrow not yet finalized, over the devshard protocol', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('finalizes over the protocol first (as devshardctl does), then settles "v4.1"; after a restart the finalize file is still served', async () => {
    for (let i = 0; i < 3; i++) expect((await gw.call('/v1/chat/completions', { body: chat(i, i === 1 ? { stream: true } : {}) })).status).toBe(200);
    const r = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ status: 'settled', settled: true });
    expect(BigInt(r.json.deposit)).toBe(BigInt((await gw.ctx.chain.escrow(escrowId))!.amount));
    const s = gw.ctx.engine.escrow(escrowId)!.context.settlement!;
    // 3 chats, MsgFinalizeRound at 4, Settlement at 4 + 3
    expect(s).toMatchObject({ version: 2, stateRootVersion: 'v4.1', nonce: 7 });
    const file = (await gw.call(`/devshard/${escrowId}/v1/finalize`)).json;
    expect(file).toMatchObject({ escrow_id: escrowId, version: 'v4.1', nonce: 7 });
    gw = await gw.restart();
    expect((await gw.call(`/devshard/${escrowId}/v1/finalize`)).json).toEqual(file);
  }, 60_000);
});
