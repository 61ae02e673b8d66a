/**
 * DEVNET_STATE keeps the simulated hosts' protocol sessions: each host writes every diff it applies
 * (per escrow) through to the state file, and a restarted devnet replays them into the host's
 * Replica (checked as on receipt: user signature, sequence, root) before the session serves again,
 * as a real host resumes from its storage. A gateway restarted with its devnet goes on chatting
 * without resending what the hosts already had, then finalizes and settles.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const chat = (i: number) => ({ model: MODEL, messages: [{ role: 'user', content: `restart question ${i}` }], max_tokens: 8 });

describe('the simulated hosts resume their sessions after a devnet restart (DEVNET_STATE)', () => {
  let gw: TestGateway;
  let escrowId: string;

  beforeAll(async () => {
    // The test gateway's devnet keeps its state in {storage}/devnet.sqlite (src/main/start.ts).
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard' } }));
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('each host has the same latest nonce and root after the restart; chat, finalize and settle go on', async () => {
    for (let i = 0; i < 4; i++) expect((await gw.call('/v1/chat/completions', { body: chat(i) })).status).toBe(200);
    await gw.ctx.engine.idle();
    const before = gw.devnet!.hosts.map((h) => gw.devnet!.simulatedHosts.protocol.peek(h.index, escrowId));
    expect(before.every((s) => s !== undefined)).toBe(true);
    const seen = before.map((s) => ({ nonce: s!.latestNonce, root: Buffer.from(s!.replica.stateRoot()).toString('hex'), applied: [...s!.applied.keys()] }));

    // the sessions are the escrow's version's: v4.1, the newest the devnet approves
    expect(gw.devnet!.hosts.map((h) => gw.devnet!.simulatedHosts.protocol.versionsOf(h.index, escrowId))).toEqual(gw.devnet!.hosts.map(() => ['v4.1']));

    gw = await gw.restart();
    // GET diffs on the escrow's route opens each host's session: replayed from the state file
    for (const [i, h] of gw.devnet!.hosts.entries()) {
      const res = await fetch(`${gw.devnet!.url}${h.prefix}/devshard/v4.1/sessions/${escrowId}/diffs?from=0&to=100`);
      expect(res.status).toBe(200);
      const diffs = (await res.json()) as { diff: { nonce: number } }[];
      expect(diffs.map((d) => BigInt(d.diff.nonce))).toEqual(seen[i]!.applied);
      // once open, the versionless read answers the same from it
      const versionless = await fetch(`${gw.devnet!.url}${h.prefix}/devshard/sessions/${escrowId}/diffs?from=0&to=100`);
      expect(versionless.status).toBe(200);
      expect(((await versionless.json()) as { diff: { nonce: number } }[]).map((d) => BigInt(d.diff.nonce))).toEqual(seen[i]!.applied);
      const s = gw.devnet!.simulatedHosts.protocol.peek(h.index, escrowId, 'v4.1')!;
      expect({ nonce: s.latestNonce, root: Buffer.from(s.replica.stateRoot()).toString('hex'), applied: [...s.applied.keys()] }).toEqual(seen[i]);
    }

    for (let i = 4; i < 7; i++) {
      const r = await gw.call('/v1/chat/completions', { body: chat(i) });
      expect(r.status, r.text).toBe(200);
    }
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    expect(s.json).toMatchObject({ status: 'settled', settled: true });
  }, 90_000);
});
