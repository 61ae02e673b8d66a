/**
 * The devshard protocol sessions in the log, read back offline (issue 29, "In the log"): a real
 * protocol run through the whole stack (DEVSHARD_HOST_PROTOCOL=devshard: chats streamed and not,
 * finalize with every slot's signature), then, with the gateway stopped, `shardgate verify` rebuilds
 * the escrow's replica from DevshardSessionOpened + DevshardDiffSent and checks every nonce, user
 * signature, root, the settlement and its signatures; `replay` shows each diff's txs; `explain
 * request` follows one inference through the diffs. A log with one byte of a diff (or of a
 * settlement signature) altered fails verify, naming the escrow, the nonce and the rule.
 */
import Database from 'better-sqlite3';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runExplainRequest } from '../../src/cli/commands/explain.js';
import { runReplay } from '../../src/cli/commands/replay.js';
import { runVerify } from '../../src/cli/commands/verify.js';
import { canonicalJson } from '../../src/events/canonical-json.js';
import { devshardSessionStream } from '../../src/events/catalog.js';
import { eventHash } from '../../src/events/hash.js';
import { EVENT_COLUMNS, type EventRow } from '../../src/events/rows.js';
import { eventsFile, openSqliteEventStore } from '../../src/events/sqlite-store.js';
import { MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

const chat = (i: number, extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: `log question ${i}` }], max_tokens: 24, ...extra });

async function run(fn: (out: (s: string) => void, err: (s: string) => void) => Promise<number> | number | void): Promise<{ code: number | void; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await fn(
    (s) => (out += s),
    (s) => (err += s),
  );
  return { code, out, err };
}

/**
 * A copy of the log with `alter` applied to the data of the first event matching `pick`; with
 * `rehash`, every hash from there on is recomputed (a forger who rewrote the chain), so only the
 * devshard check can tell.
 */
function tampered(file: string, pick: (type: string, data: any) => boolean, alter: (data: any) => void, rehash: boolean): string {
  const dir = mkdtempSync(join(tmpdir(), 'shardgate-tamper-'));
  const copy = join(dir, 'events.sqlite');
  copyFileSync(file, copy);
  const db = new Database(copy);
  db.exec('DROP TRIGGER IF EXISTS events_no_update');
  db.exec('DELETE FROM checkpoints');
  const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events ORDER BY position`).raw().all() as EventRow[];
  const at = rows.findIndex((r) => pick(r[3], JSON.parse(r[5])));
  expect(at).toBeGreaterThanOrEqual(0);
  const data = JSON.parse(rows[at]![5]);
  alter(data);
  rows[at]![5] = canonicalJson(data);
  db.prepare('UPDATE events SET data = ? WHERE position = ?').run(rows[at]![5], rows[at]![0]);
  if (rehash) {
    const update = db.prepare('UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?');
    let prev = at === 0 ? '' : rows[at - 1]![9];
    for (const r of rows.slice(at)) {
      const [position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time] = r;
      const hash = eventHash(prev, { position, streamId, streamVersion, type, schemaVersion, dataJson, metadataJson, time });
      update.run(prev, hash, position);
      prev = hash;
    }
  }
  db.close();
  return copy;
}

/** One byte of a base64 field flipped. */
const flip = (b64: string, index = 0): string => {
  const b = Buffer.from(b64, 'base64');
  b[index] = b[index]! ^ 0x01;
  return b.toString('base64');
};

describe('the devshard protocol log read back offline: verify, replay, explain', () => {
  let gw: TestGateway;
  let escrowId: string;
  let storageDir: string;
  let file: string;
  const tmp: string[] = [];

  beforeAll(async () => {
    ({ gw, escrowId } = await startGatewayWithEscrow({ env: { DEVSHARD_HOST_PROTOCOL: 'devshard' } }));
    storageDir = gw.storageDir;
    for (let i = 0; i < 4; i++) {
      const headers = { 'x-request-id': `log-request-${i}` };
      if (i % 2 === 0) {
        const res = await fetch(`${gw.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${gw.keys.adminApiKey}`, 'content-type': 'application/json', ...headers },
          body: JSON.stringify(chat(i, { stream: true })),
        });
        expect(res.status).toBe(200);
        expect(await res.text()).toContain('data: [DONE]');
      } else {
        const r = await gw.call('/v1/chat/completions', { body: chat(i), headers });
        expect(r.status, r.text).toBe(200);
      }
    }
    await gw.ctx.engine.idle();
    const f = await gw.call(`/devshard/${escrowId}/v1/finalize`, { method: 'POST' });
    expect(f.status, f.text).toBe(200);
    expect(f.json.nonce).toBe(8);
    await gw.stop();
    file = eventsFile(storageDir);
  }, 90_000);
  afterAll(() => {
    for (const d of [storageDir, ...tmp]) if (d) rmSync(d, { recursive: true, force: true });
  });

  it('the log holds the session facts before the first diff, then the diffs 1..8', () => {
    const store = openSqliteEventStore(file);
    try {
      const types = store.readStream(devshardSessionStream(escrowId)).map((r) => r.type);
      expect(types[0]).toBe('DevshardSessionOpened');
      // the diffs 1..8, with the host txs taken from answers (ConfirmStart, Finish) between them, and
      // how far each host applied them (its latest receipt)
      expect(types.filter((t) => t === 'DevshardDiffSent')).toHaveLength(8);
      expect(new Set(types.slice(1))).toEqual(new Set(['DevshardDiffSent', 'DevshardHostTxsReceived', 'DevshardHostAcknowledged']));
      const opened = store.readStream(devshardSessionStream(escrowId))[0]!.data as { creator: string; slots: unknown[]; amount: string };
      expect(opened.slots).toHaveLength(3);
      expect(opened.creator).toMatch(/^gonka1/);
    } finally {
      void store.close();
    }
  });

  it('verify rebuilds the replica: every nonce, user signature and root, the settlement and its 3 signatures', async () => {
    const r = await run((out, err) => runVerify(file, out, err));
    expect(r.code, r.out + r.err).toBe(0);
    // the escrow's protocol (the newest the devnet approves), the diffs we composed, what each host applied
    expect(r.out).toMatch(
      new RegExp(
        `devshard escrow ${escrowId} \\(v4\\.1 on /devshard/v4\\.1, tag "v4\\.1"\\): composed 8 diffs, nonces 1\\.\\.8, replica nonce 8 Settlement, root [0-9a-f]{16}…; ` +
          `applied by the hosts: (http://127\\.0\\.0\\.1:\\d+/hosts/[012] to nonce 8, ){2}http://127\\.0\\.0\\.1:\\d+/hosts/[012] to nonce 8; ` +
          'settlement at nonce 8 equals the replica, 3/3 signatures recover to their slots',
      ),
    );
    for (const slot of [0, 1, 2]) expect(r.out).toMatch(new RegExp(`/hosts/${slot} to nonce 8`));
  });

  it('replay shows each diff: nonce, txs by kind (Finish with tokens and cost), root; the replica at the end', async () => {
    const store = openSqliteEventStore(file);
    try {
      const r = await run((out) => runReplay(store, { escrow: escrowId }, out));
      const lines = r.out.split('\n');
      expect(lines.some((l) => l.includes('DevshardSessionOpened') && l.includes('session bound: creator gonka1') && l.includes('3 slots'))).toBe(true);
      expect(lines.find((l) => l.includes('-> nonce 1: '))).toMatch(/-> nonce 1: StartInference#1; root [0-9a-f]{12}…/);
      expect(lines.some((l) => /-> nonce \d: .*ConfirmStart#1.*/.test(l))).toBe(true);
      expect(lines.some((l) => /Finish#1 \(slot 1, tokens in \d+ out \d+ → cost \d+\)/.test(l))).toBe(true);
      expect(lines.find((l) => l.includes('-> nonce 5: '))).toContain('FinalizeRound');
      expect(lines.find((l) => l.includes('-> nonce 8: '))).toContain('Settlement');
      expect(r.out).toMatch(new RegExp(`devshard sessions \\(1\\):\\n    ${escrowId}  Settlement  nonce=8 balance=\\d+ fees=\\d+ finalize_nonce=5 root=`));
      const j = await run((out) => runReplay(store, { escrow: escrowId, json: true }, out));
      const doc = JSON.parse(j.out);
      expect(doc.devshard[0]).toMatchObject({ escrowId, diffs: 8, replica: { phase: 'Settlement', nonce: 8 }, failures: [] });
      expect(doc.timeline.filter((x: any) => x.devshard).map((x: any) => x.devshard.nonce)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    } finally {
      await store.close();
    }
  });

  it('explain request follows one inference: its Start, the ConfirmStart and Finish later diffs carried, the cost charged and billed', async () => {
    const store = openSqliteEventStore(file);
    try {
      const r = await run((out) => void runExplainRequest(store, 'log-request-1', {}, out));
      expect(r.out).toContain(`request log-request-1: escrow ${escrowId}, nonce 2`);
      expect(r.out).toMatch(/gateway {2}position \d+: finished, usage in \d+ out \d+, billed \d+/);
      expect(r.out).toMatch(/diff nonce +2 \(position \d+\): StartInference#2 \(model /);
      expect(r.out).toMatch(/diff nonce +[3-8] \(position \d+\): ConfirmStart#2/);
      expect(r.out).toMatch(/diff nonce +[3-8] \(position \d+\): Finish#2 \(slot 2, tokens in \d+ out \d+ → cost \d+\)/);
      expect(r.out).toMatch(/replica: finished, executor slot 2 \(gonka1\w+\), tokens in \d+ out \d+, reserved \d+, charged \d+/);
      expect(r.out).toMatch(/settlement at nonce 8: slot 2 is paid \d+ in all/);
      // what each host applied, and whether that covers this request's start (nonce 2)
      for (const slot of [0, 1, 2]) expect(r.out).toMatch(new RegExp(`host http://127\\.0\\.0\\.1:\\d+/hosts/${slot}: applied through nonce 8, its start \\(nonce 2\\) applied`));
      const j = JSON.parse((await run((out) => void runExplainRequest(store, `devshard-${escrowId}-2`, { json: true }, out))).out);
      expect(j.requestId).toBe('log-request-1');
      expect(j.devshard.steps.map((s: any) => s.tx.kind)).toEqual(['StartInference', 'ConfirmStart', 'Finish']);
      // the gateway billed the host's count: the replica's charge equals the gateway's recorded cost
      const finished = j.gateway.find((g: any) => g.type === 'InferenceFinished');
      expect(j.devshard.record.actualCost).toBe(finished.data.cost);
      expect(runExplainRequest(store, 'no-such-request', {}, () => {})).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('one byte of a diff altered (chain rewritten): verify fails naming the escrow, the nonce and the rule', async () => {
    const root = tampered(file, (t, d) => t === 'DevshardDiffSent' && d.nonce === '3', (d) => (d.postStateRoot = flip(d.postStateRoot, 7)), true);
    tmp.push(join(root, '..'));
    const a = await run((out, err) => runVerify(root, out, err));
    expect(a.code).toBe(1);
    expect(a.out).toContain(`devshard escrow ${escrowId}, nonce 3: user-signature: the diff's user signature recovers to`);

    const txs = tampered(file, (t, d) => t === 'DevshardDiffSent' && d.nonce === '3', (d) => (d.txs = flip(d.txs, Buffer.from(d.txs, 'base64').length - 1)), true);
    tmp.push(join(txs, '..'));
    const b = await run((out, err) => runVerify(txs, out, err));
    expect(b.code).toBe(1);
    expect(b.out).toMatch(new RegExp(`devshard escrow ${escrowId}, nonce 3: (user-signature|diff-decode): `));
  });

  it('one byte of a diff altered (chain left as it was): the hash chain fails at that event, naming it and its nonce', async () => {
    const copy = tampered(file, (t, d) => t === 'DevshardDiffSent' && d.nonce === '3', (d) => (d.postStateRoot = flip(d.postStateRoot, 7)), false);
    tmp.push(join(copy, '..'));
    const r = await run((out, err) => runVerify(copy, out, err));
    expect(r.code).toBe(1);
    expect(r.out).toContain(`hash mismatch: the event was altered after it was written (DevshardDiffSent in devshard-session-${escrowId}, nonce 3)`);
  });

  it('a settlement signature or host stat altered: verify names the slot or what differs from the replica', async () => {
    const sig = tampered(file, (t) => t === 'EscrowFinalized', (d) => (d.settlement.signatures[1].signature = flip(d.settlement.signatures[1].signature, 5)), true);
    tmp.push(join(sig, '..'));
    const a = await run((out, err) => runVerify(sig, out, err));
    expect(a.code).toBe(1);
    expect(a.out).toMatch(new RegExp(`devshard escrow ${escrowId}, nonce 8: settlement-signature: the signature of slot 1 does not recover to its host gonka1`));

    const stat = tampered(file, (t) => t === 'EscrowFinalized', (d) => (d.settlement.hostStats[0].cost = String(BigInt(d.settlement.hostStats[0].cost) + 1n)), true);
    tmp.push(join(stat, '..'));
    const b = await run((out, err) => runVerify(stat, out, err));
    expect(b.code).toBe(1);
    expect(b.out).toContain(`devshard escrow ${escrowId}, nonce 8: settlement: the recorded settlement differs from the replica's: host_stats`);
  });
});
