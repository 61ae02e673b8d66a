/**
 * The spec's operator step 8 through the real stack: a temporary gateway A (DEVSHARDS_JSON=[])
 * carries an escrow on the shared embedded devnet and serves chat; once A's active_requests is 0 its
 * export is imported into the main gateway B (inactive), activated there, and B continues the nonce
 * sequence (never reusing one of A's), then finalizes and settles with accounting covering both.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import { generateKeys } from '../../src/config/index.js';
import { devshardSessionStream, escrowStream } from '../../src/events/catalog.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { eventsFile } from '../../src/events/storage-path.js';
import { verifyLog } from '../../src/events/verify.js';
import type { ExportedEvent } from '../../src/gateway/escrows/exported-stream.js';
import { exportedRows } from '../helpers/exported-stream.js';
import { createEscrowViaApi, disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

const AMOUNT = 10_000_000_000n;
const chatBody = (content: string) => ({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 16 });

async function balanceOf(devnet: Devnet, address: string): Promise<bigint> {
  const j = (await (await fetch(`${devnet.url}/cosmos/bank/v1beta1/balances/${address}`)).json()) as { balances: { denom: string; amount: string }[] };
  return BigInt(j.balances.find((b) => b.denom === 'ngonka')?.amount ?? '0');
}

/** Chats on the gateway's only routable escrow; answers the nonces used. */
async function chat(gw: TestGateway, escrowId: string, n: number, tag: string): Promise<number[]> {
  const nonces: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await gw.call('/v1/chat/completions', { body: chatBody(`${tag} ${i}`) });
    expect(r.status, r.text).toBe(200);
    expect(r.headers.get('x-devshard-escrow-id')).toBe(escrowId);
    nonces.push(Number(r.headers.get('x-devshard-nonce')));
  }
  return nonces;
}

describe('hot swap: export from a temporary gateway, import into the main one (operator step 8)', () => {
  const keys = generateKeys();
  const devnetDir = mkdtempSync(join(tmpdir(), 'shardgate-hot-swap-'));
  let devnet: Devnet;
  let a: TestGateway | undefined;
  let b: TestGateway;
  let escrowId: string;
  let exportText: string;
  let nonceA: number[];
  let spentA: bigint;

  beforeAll(async () => {
    devnet = await startDevnet({ env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '0' }, creators: [keys.privateKey], statePath: join(devnetDir, 'devnet.sqlite'), port: 0 });
    // Both gateways hold the creator key (B must, to route and settle); both reach the same chain and hosts.
    const chainEnv = { NODE_RPC: devnet.rpcUrl, NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url };
    a = await startTestGateway({ keys, env: { ...chainEnv, DEVSHARD_INSTANCE_NAME: 'shardgate-temporary' } });
    b = await startTestGateway({ keys, env: chainEnv });
  });
  afterAll(async () => {
    await disposeTestGateway(a);
    await disposeTestGateway(b);
    await devnet?.close();
    rmSync(devnetDir, { recursive: true, force: true });
  });

  it('A creates and registers an escrow and serves chat (nonces advance, cost is spent)', async () => {
    escrowId = await createEscrowViaApi(a!, AMOUNT.toString());
    nonceA = await chat(a!, escrowId, 1, 'on A');
    // Another stream's event between the escrow's: the export's positions are not adjacent there.
    expect((await a!.call('/v1/admin/settings', { body: { default_request_max_tokens: 2000 } })).status).toBe(200);
    nonceA.push(...(await chat(a!, escrowId, 2, 'on A')));
    expect(nonceA).toEqual([1, 2, 3]);
    const view = (await a!.call(`/v1/admin/devshards/${escrowId}`)).json;
    spentA = BigInt(view.spent);
    expect(spentA).toBeGreaterThan(0n);
  });

  it("A's export, taken once its active_requests is 0, is the whole stream with provenance", async () => {
    const status = (await a!.call('/v1/status', { key: 'none' })).json;
    expect(status.active_requests).toBe(0);
    // The operator's drain check, as devshardctl scripts write it: jq '[.devshards[].active_requests]' all zero.
    expect(status.devshards.map((d: { active_requests: number }) => d.active_requests)).toEqual([0]);
    const r = await a!.call(`/v1/admin/devshards/${escrowId}/export`);
    expect(r.status, r.text).toBe(200);
    exportText = r.text;
    const doc = r.json;
    expect(Object.keys(doc).sort()).toEqual(['devshard_session', 'escrow', 'events', 'exported_at', 'source']);
    // The session the hosts hold: every diff A sent (nonces 1..3), and the host txs no diff carried yet.
    expect(doc.devshard_session.diffs.map((d: { nonce: string }) => d.nonce)).toEqual(['1', '2', '3']);
    expect(Array.isArray(doc.devshard_session.host_txs)).toBe(true);
    expect(doc.source).toBe('shardgate-temporary');
    expect(doc.escrow).toMatchObject({ escrow_id: escrowId, active: false, nonce: 3, spent: spentA.toString() });
    expect(doc.events.map((e: { stream_version: number }) => e.stream_version)).toEqual(doc.events.map((_: unknown, i: number) => i));
    expect(exportText).not.toContain(keys.privateKey);
    // A is then stopped (the procedure: its active_requests reached zero first).
    await a!.stop();
  });

  it('malformed import bodies answer a 400 (409 for an export taken mid-request) naming the member; B records nothing', async () => {
    const doc = JSON.parse(exportText);
    const events = doc.events as ExportedEvent[];
    // The gateway records requests as entries of InferencesRecorded: the first event holding an entry of `type`.
    type Entries = { entries: { type: string; data: Record<string, unknown> }[] };
    const at = (type: string) => events.findIndex((e) => e.type === 'InferencesRecorded' && (e.data as Entries).entries.some((x) => x.type === type));
    const started = at('InferenceStarted');
    const finished = at('InferenceFinished');
    const entryOf = (i: number, type: string) => (events[i]!.data as Entries).entries.findIndex((x) => x.type === type);
    /** Event i's data with its first entry of `type` changed. */
    const withEntry = (i: number, type: string, change: Record<string, unknown>) => {
      const entries = (events[i]!.data as Entries).entries.map((x, k) => (k === entryOf(i, type) ? { ...x, data: { ...x.data, ...change } } : x));
      return { data: { entries } };
    };
    const startData = (events[started]!.data as Entries).entries[entryOf(started, 'InferenceStarted')]!.data;
    const withEvent = (i: number, change: Partial<ExportedEvent>) => ({ ...doc, events: events.map((e, j) => (j === i ? { ...e, ...change } : e)) });
    const created = events[0]!;
    const cases: [string, unknown, number, string, RegExp][] = [
      ['the audit example: EscrowImported with empty data', { escrow: { escrow_id: escrowId }, events: [{ type: 'EscrowImported', data: {} }] }, 400, 'events[0].data.escrowId', /Missing required/],
      ["another escrow's events", { ...doc, escrow: { ...doc.escrow, escrow_id: '999' } }, 400, 'events[0].hash', /not of escrow 999/],
      ['a non-numeric amount', withEvent(0, { data: { ...created.data, amount: 'lots' } }), 400, 'events[0].data.amount', /Invalid value/],
      ['a nonce given as a string', withEvent(started, withEntry(started, 'InferenceStarted', { nonce: '1' })), 400, `events[${started}].data.entries[${entryOf(started, 'InferenceStarted')}].data.nonce`, /expected an integer/],
      ['an edited cost (hash kept)', withEvent(finished, withEntry(finished, 'InferenceFinished', { cost: '1' })), 400, `events[${finished}].hash`, /altered/],
      ['an event left out', { ...doc, events: events.filter((_, j) => j !== started) }, 400, `events[${started}].stream_version`, /whole stream/],
      [
        'a reused nonce, hashes recomputed',
        { ...doc, events: exportedRows(escrowId, [...events, { type: 'InferencesRecorded', data: { entries: [{ data: { ...startData, requestId: 'again' }, type: 'InferenceStarted' }] } }]) },
        400,
        `events[${events.length}].type`,
        /reused nonce/,
      ],
      [
        'an older log: a reused nonce as its own InferenceStarted',
        { ...doc, events: exportedRows(escrowId, [...events, { type: 'InferenceStarted', data: { ...startData, requestId: 'again' } }]) },
        400,
        `events[${events.length}].type`,
        /reused nonce/,
      ],
      [
        "a diff's root edited: the replay against the chain's facts names the nonce",
        { ...doc, devshard_session: { ...doc.devshard_session, diffs: doc.devshard_session.diffs.map((d: any, j: number) => (j === 1 ? { ...d, postStateRoot: doc.devshard_session.diffs[0].postStateRoot } : d)) } },
        400,
        'devshard_session.diffs[1]',
        /diff of nonce 2 .*does not replay against the chain's facts/,
      ],
      [
        'a diff left out of the session',
        { ...doc, devshard_session: { ...doc.devshard_session, diffs: doc.devshard_session.diffs.filter((_: unknown, j: number) => j !== 0) } },
        400,
        'devshard_session.diffs[0]',
        /diff of nonce 2 .*must be sequential/,
      ],
      [
        'a diff signed by another key',
        { ...doc, devshard_session: { ...doc.devshard_session, diffs: doc.devshard_session.diffs.map((d: any, j: number) => (j === 2 ? { ...d, userSig: Buffer.alloc(65, 7).toString('base64') } : d)) } },
        400,
        'devshard_session.diffs[2]',
        /diff of nonce 3 /,
      ],
      ['a diff that is not base64', { ...doc, devshard_session: { diffs: [{ ...doc.devshard_session.diffs[0], txs: 'not base64!' }] } }, 400, 'devshard_session.diffs[0].txs', /pattern|Invalid/],
      // An export made before exports carried the session: the hosts hold nonces 1..3 it cannot replay.
      ['an older export without devshard_session, of a used escrow', (({ devshard_session: _, ...older }) => older)(doc), 400, 'devshard_session', /carries no devshard_session diffs, but devshard \d+ used 3 nonce\(s\).*Export again/],
      ['a devshard_session emptied', { ...doc, devshard_session: { diffs: [], host_txs: [] } }, 400, 'devshard_session', /carries no devshard_session diffs/],
      ['an escrow.spent that differs from the events', { ...doc, escrow: { ...doc.escrow, spent: '1' } }, 400, 'escrow.spent', /differs/],
      ['an unknown top-level member', { ...doc, comment: 'hi' }, 400, 'comment', /Unrecognized/],
      ['a body over 1 MiB (the export of a busy escrow is)', { ...doc, source: 'x'.repeat(2 * 1024 * 1024) }, 400, 'source', /at most 256/],
      ['an export taken with a request in flight', { ...doc, escrow: { escrow_id: escrowId }, events: events.slice(0, started + 1) }, 409, '', /in flight/],
    ];
    const before = b.store.lastPosition();
    for (const [what, body, status, param, message] of cases) {
      const r = await b.call('/v1/admin/devshards/import', { body });
      expect(r.status, `${what}: ${r.text}`).toBe(status);
      expect(r.json.error.message, what).toMatch(message);
      if (param) expect(r.json.error).toMatchObject({ type: 'invalid_request_error', param });
      expect(b.store.lastPosition(), what).toBe(before);
    }
    expect((await b.call(`/v1/admin/devshards/${escrowId}`)).status).toBe(404);
  });

  let nonceB: number[];
  it('B imports the export document as is (curl -d @file): inactive, nonce and spend carried over', async () => {
    const before = b.store.lastPosition();
    const r = await b.call('/v1/admin/devshards/import', { body: exportText });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ escrow_id: escrowId, state: 'imported', routable: false, spent: spentA.toString() });
    // No nonce A may have used is usable on B: A's reservation is skipped too.
    expect(r.json.nonce).toBeGreaterThanOrEqual(Math.max(...nonceA));
    // Over the protocol the next nonce follows A's last diff.
    expect(r.json.nonce).toBe(3);
    // B's own events, chained to B's log (A's positions and hashes are not reused): the session A's
    // diffs built, re-recorded first (the facts it was replayed against, the diffs, the pending host
    // txs), then the escrow's EscrowImported.
    const doc = JSON.parse(exportText);
    const session = b.store.readStream(devshardSessionStream(escrowId));
    expect(session[0]!.type).toBe('DevshardSessionOpened');
    expect(session[0]!.position).toBe(before + 1);
    expect(session.filter((x) => x.type === 'DevshardDiffSent').map((x) => x.data)).toEqual(doc.devshard_session.diffs);
    expect(session.filter((x) => x.type === 'DevshardHostTxsReceived').map((x) => x.data)).toEqual(doc.devshard_session.host_txs);
    const recs = b.store.readStream(escrowStream(escrowId));
    expect(recs.map((x) => x.type)).toEqual(['EscrowImported']);
    expect(recs[0]!.position).toBe(session.at(-1)!.position + 1);
    expect(recs[0]!.streamVersion).toBe(0);
    expect(recs[0]!.data).toMatchObject({
      active: false,
      provenance: { source: 'shardgate-temporary', exportedAt: doc.exported_at, lastPosition: doc.events.at(-1).position, lastHash: doc.events.at(-1).hash },
    });
    // Inactive at import: no chat is routed to it yet.
    const refused = await b.call('/v1/chat/completions', { body: chatBody('too early') });
    expect(refused.status).toBe(503);
  });

  it('activated on B, chat continues above the last nonce used on A', async () => {
    const r = await b.call(`/v1/admin/devshards/${escrowId}/activate`, { method: 'POST' });
    expect(r.status, r.text).toBe(200);
    expect(r.json.state).toBe('active');
    nonceB = await chat(b, escrowId, 3, 'on B');
    expect(nonceB[0]!).toBeGreaterThan(Math.max(...nonceA));
    expect([...nonceB].sort((x, y) => x - y)).toEqual(nonceB);
    expect(new Set([...nonceA, ...nonceB]).size).toBe(6);
  });

  it('B finalizes and settles: host stats cover A and B, the hosts sign, the refund is exact', async () => {
    const view = (await b.call(`/v1/admin/devshards/${escrowId}`)).json;
    const spent = BigInt(view.spent);
    expect(spent).toBeGreaterThan(spentA);
    const f = await b.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    // The protocol A recorded at create (v4.1, the newest the devnet approves) came with the export.
    expect(f.json.version).toBe('v4.1');
    // MsgFinalizeRound after B's last request, then one diff per slot to the Settlement phase.
    expect(f.json.nonce).toBe(Math.max(...nonceB) + 1 + f.json.host_stats.length);
    expect(f.json.host_stats.reduce((n: bigint, h: { cost: string }) => n + BigInt(h.cost), 0n)).toBe(spent);
    // Our per-slot request count (bookkeeping, not in the settlement file) covers A's and B's requests.
    const finalized = b.store.readStream(escrowStream(escrowId)).find((x) => x.type === 'EscrowFinalized')!.data as { settlement: { hostStats: { requests: number }[] } };
    expect(finalized.settlement.hostStats.reduce((n, h) => n + h.requests, 0)).toBe(6);
    // Each host's claim matches what it served on A and on B, so it signs.
    expect(f.json.signatures.length).toBe(f.json.host_stats.length);

    const creator = devnet.creators[0]!.address;
    const before = await balanceOf(devnet, creator);
    const s = await b.call(`/v1/admin/devshards/${escrowId}/settle`, { body: {} });
    expect(s.status, s.text).toBe(200);
    // The hosts are paid the costs (A's and B's) and the protocol's fees (create fee, fee per nonce); the creator the rest.
    const fees = BigInt(f.json.fees);
    expect(s.json).toMatchObject({ status: 'settled', settled: true, refund: (AMOUNT - spent - fees).toString(), total_payout: (spent + fees).toString() });
    expect(devnet.chain.state.escrows[escrowId]!.settled).toBe(true);
    expect((await balanceOf(devnet, creator)) - before).toBe(AMOUNT - spent - fees - b.ctx.config.chain.txFeeAmount);
    expect(await verifyLog(eventsFile(b.storageDir))).toMatchObject({ ok: true });
    // `shardgate verify` on B's log: the session from nonce 1 (A's diffs re-recorded, then B's), every
    // user signature and root, and the settlement with its signatures.
    let out = '';
    let err = '';
    const code = await runVerify(eventsFile(b.storageDir), (x) => void (out += x), (x) => void (err += x));
    expect(code, out + err).toBe(0);
    expect(out).toContain(`devshard escrow ${escrowId} (v4.1 on /devshard/v4.1, tag "v4.1"): composed ${f.json.nonce} diffs, nonces 1..${f.json.nonce}, replica nonce ${f.json.nonce} Settlement`);
    // every host applied the diffs through the settlement's nonce (it signed there)
    expect(out).toMatch(new RegExp(`applied by the hosts: (http://127\\.0\\.0\\.1:\\d+/hosts/[012] to nonce ${f.json.nonce}(, |; )){3}`));
    expect(out).toMatch(new RegExp(`settlement at nonce ${f.json.nonce} equals the replica, ${f.json.signatures.length}/${f.json.signatures.length} signatures recover to their slots`));
  });
});
