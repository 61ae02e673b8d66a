/**
 * A restart on the same storage keeps escrows (nonce, balance), settings, access modes and the
 * disabled state; chat continues on the same escrow with the next nonce (never a reused one), and
 * the escrow still finalizes and settles (the embedded devnet and its hosts restore their state).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevnet } from '../../src/devnet/chain/index.js';
import { rebaseSlotUrls } from '../../src/devnet/chain/listen.js';
import type { ChainState } from '../../src/devnet/chain/state.js';
import { planCompletion } from '../../src/devnet/hosts/completion-plan.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { replay } from '../../src/projections/replay.js';
import { requestRecords } from '../helpers/request-records.js';
import { expectedRefund, settlementCharges } from '../helpers/settlement.js';
import { holdHostRequests } from '../helpers/waits.js';

const chatBody = (content: string) => ({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 12 });
const NEW_URL = 'https://next.example.org';

describe('restart keeps the gateway state', () => {
  let gw: TestGateway;
  let escrowId: string;
  let before: { devshard: any; settings: any; models: any; timeline: any };

  beforeAll(async () => {
    gw = await startTestGateway();
    escrowId = await createEscrowViaApi(gw);
    expect((await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }], default_request_max_tokens: 20, request_max_tokens_cap: 30 } })).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await gw.call('/v1/chat/completions', { key: 'client', body: chatBody(`before ${i}`) })).status).toBe(200);
    expect((await gw.call('/v1/admin/settings', { body: { disabled: { enabled: true, message: 'maintenance', new_url: NEW_URL } } })).status).toBe(200);
    before = {
      devshard: (await gw.call(`/v1/admin/devshards/${escrowId}`)).json,
      settings: (await gw.call('/v1/admin/settings')).json,
      models: (await gw.call('/v1/status', { key: 'none' })).status,
      timeline: (await gw.call(`/v1/admin/devshards/${escrowId}/timeline`)).json,
    };
    expect(before.devshard.nonce).toBe(3);
    gw = await gw.restart();
  });
  afterAll(() => disposeTestGateway(gw));

  it('keeps the escrow: state, nonce, balance, spent', async () => {
    const after = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(after).toEqual(before.devshard);
    expect((await gw.call('/v1/admin/devshards')).json.data).toHaveLength(1);
  });

  it("keeps the escrow's timeline (read from the log), which agrees with replay", async () => {
    const after = (await gw.call(`/v1/admin/devshards/${escrowId}/timeline`)).json;
    expect(before.timeline.entries.map((e: { event: string }) => e.event)).toEqual(expect.arrayContaining(['EscrowCreateRequested', 'EscrowCreated', 'EscrowRegistered', 'InferencesRecorded']));
    expect(after.entries.slice(0, before.timeline.entries.length)).toEqual(before.timeline.entries);
    expect(after.total).toBe(after.entries.length);
    // The timeline is the escrow statechart's; replay --escrow also lists the escrow's devshard session stream.
    const rows = [...replay(gw.store.readAll(), { escrow: escrowId })].filter((r) => r.stream !== `devshard-session-${escrowId}`);
    const shown = (e: { position: number; event: string; actor: string; state: string; accepted: boolean }) => [e.position, e.event, e.actor, e.state, e.accepted];
    expect(after.entries.map(shown)).toEqual(rows.map(shown));
  });

  it('keeps the settings, the access mode and the disabled state', async () => {
    const settings = (await gw.call('/v1/admin/settings')).json;
    expect(settings).toEqual(before.settings);
    expect(settings.model_limits).toEqual([{ model_id: MODEL, access_mode: 'api_key' }]);
    expect(settings.disabled).toEqual({ enabled: true, message: 'maintenance', new_url: NEW_URL });
    const r = await gw.call('/v1/chat/completions', { key: 'client', body: chatBody('while disabled') });
    expect(r.status).toBe(308);
    expect(r.headers.get('location')).toBe(NEW_URL);
    expect(r.json).toEqual({ status: 'disabled', message: 'maintenance', new_url: NEW_URL });
    expect((await gw.call('/v1/status', { key: 'none' })).status).toBe(308);
  });

  it('chat continues on the same escrow with the next nonce; a client key is still allowed', async () => {
    expect((await gw.call('/v1/admin/settings', { body: { disabled: { enabled: false } } })).status).toBe(200);
    const r = await gw.call('/v1/chat/completions', { key: 'client', body: chatBody('after restart') });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('x-devshard-escrow-id')).toBe(escrowId);
    expect(r.headers.get('x-devshard-nonce')).toBe('4');
    const started = requestRecords(gw.store.readStream(`escrow-${escrowId}`)).filter((e) => e.type === 'InferenceStarted').map((e) => e.data as { nonce: number; maxTokens: number });
    expect(started.map((s) => s.nonce)).toEqual([1, 2, 3, 4]);
    // The default max_tokens set before the restart applies after it.
    const noMax = await gw.call('/v1/chat/completions', { key: 'client', body: { model: MODEL, messages: [{ role: 'user', content: 'x' }] } });
    expect(noMax.status).toBe(200);
    const last = requestRecords(gw.store.readStream(`escrow-${escrowId}`)).filter((e) => e.type === 'InferenceStarted').at(-1)!.data as { nonce: number; maxTokens: number };
    expect(last).toMatchObject({ nonce: 5, maxTokens: 20 });
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(view.nonce).toBe(5);
    expect(BigInt(view.spent)).toBeGreaterThan(BigInt(before.devshard.spent));
  });

  it('finalizes and settles after the restart: the session is rebuilt from the recorded diffs', async () => {
    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    // Requests 1..5, MsgFinalizeRound at 6, the Settlement phase at 6 + 3 slots.
    expect(f.json.nonce).toBe(9);
    expect(f.json.signatures.length).toBe(3);
    const s = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: { private_key_env: 'DEVSHARD_PRIVATE_KEY' } });
    expect(s.status, s.text).toBe(200);
    expect(s.json.settled).toBe(true);
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    // KNOWN GAP (docs/protocol.md, "Not yet on this path"): host txs pending at the restart (the last
    // request's Finish, not yet in a diff) are not in the log, so the settlement may miss them: the
    // chain then charges less than the log bills.
    expect(settlementCharges(gw.store, escrowId).hostCosts).toBeLessThanOrEqual(BigInt(view.spent));
    expect(BigInt(s.json.refund)).toBe(expectedRefund(gw.store, escrowId, view.amount));
  });

  it('a second restart keeps the settled escrow settled', async () => {
    gw = await gw.restart();
    const view = (await gw.call(`/v1/admin/devshards/${escrowId}`)).json;
    expect(view.state).toBe('settled');
    expect(view.settled).toBe(true);
    const again = await gw.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(again.status).toBe(200);
    expect(again.json.already).toBe(true);
    const onChain = await fetch(`${gw.devnet!.url}/productscience/inference/inference/devshard_escrow/${escrowId}`);
    expect(((await onChain.json()) as { escrow: { settled: boolean } }).escrow.settled).toBe(true);
  });
});

describe('a restored devnet keeps its address', () => {
  it('listens on its previous port when asked for an ephemeral one; falls back when it is taken', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shardgate-devnet-port-'));
    const statePath = join(dir, 'devnet.sqlite');
    try {
      const first = await startDevnet({ port: 0, statePath, blockTimeMs: 50 });
      const url = first.url;
      await first.close();
      const second = await startDevnet({ port: 0, statePath, blockTimeMs: 50 });
      expect(second.url).toBe(url);
      await second.close();
      // Someone else took the port: a fresh one, no failure.
      const blocker = createServer();
      await new Promise<void>((r) => blocker.listen(Number(new URL(url).port), '127.0.0.1', r));
      try {
        const third = await startDevnet({ port: 0, statePath, blockTimeMs: 50 });
        expect(third.url).not.toBe(url);
        await third.close();
      } finally {
        blocker.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('rewrites slot URLs served under the previous origin', () => {
    const state = {
      baseUrl: 'http://127.0.0.1:1000',
      escrows: { '1': { slots: [{ slotId: 0, host: 'h', url: 'http://127.0.0.1:1000/hosts/0' }, { slotId: 1, host: 'x', url: 'http://other:1000/hosts/1' }] } },
    } as unknown as ChainState;
    rebaseSlotUrls(state, 'http://127.0.0.1:2000');
    expect(state.escrows['1']!.slots.map((s) => s.url)).toEqual(['http://127.0.0.1:2000/hosts/0', 'http://other:1000/hosts/1']);
    expect(state.baseUrl).toBe('http://127.0.0.1:2000');
  });
});

describe('stopping with a stream in flight and a deferred settle', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ env: { DEVNET_TOKEN_DELAY_MS: '30' } });
  });
  afterAll(() => disposeTestGateway(gw));

  it('stop drains the stream to its end, the deferred settle completes, and the restart sees it settled', async () => {
    const id = await createEscrowViaApi(gw);
    let content = '';
    for (let i = 0; i < 500 && !content; i++) {
      const c = `a long answer please ${i}`;
      if (planCompletion({ model: MODEL, messages: [{ role: 'user', content: c }] }).pieces.length >= 30) content = c;
    }
    // The host holds the request until the settle was asked: in flight then, however slow the machine.
    const { held, release } = holdHostRequests(gw.devnet!.simulatedHosts.faults);
    const answer = fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], stream: true }),
    });
    try {
      await held;
      expect((await gw.call(`/devshard/${id}/v1/finalize`, { method: 'POST' })).status).toBe(200);
      const s = await gw.call(`/v1/admin/devshards/${id}/settle`, { body: {} });
      expect(s.status, s.text).toBe(202);
    } finally {
      release();
    }
    const res = await answer;
    expect(res.status).toBe(200);
    const body = res.text();
    // Stop (SIGTERM's path) while the stream is still running, then start again.
    const restarted = gw.restart();
    const text = await body;
    gw = await restarted;
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    const view = (await gw.call(`/v1/admin/devshards/${id}`)).json;
    expect(view.state).toBe('settled');
    expect(view.in_flight).toBe(0);
    const onChain = await fetch(`${gw.devnet!.url}/productscience/inference/inference/devshard_escrow/${id}`);
    expect(((await onChain.json()) as { escrow: { settled: boolean } }).escrow.settled).toBe(true);
  });
});
