/**
 * kill -9 on the real devshard host protocol, seen from the hosts. The devnet (chain and simulated
 * hosts) runs in this test's process, so it outlives the gateway: a `shardgate serve` child under
 * chat load is SIGKILLed at random moments and restarted on the same storage, several times, and
 * every diff any host is sent is witnessed (HostSessions.observer). Then:
 *  - 0 reused nonces: no nonce ever reached a host with two different diffs (root or signature);
 *  - 0 skipped nonces: no host refused a diff (a gap is refused); a nonce the log records as used
 *    without a start (NoncesSkipped) reached the hosts with its inference; and a diff without an
 *    inference appears only at the nonce of a request the log shows never left (started, then
 *    killed before its diff was recorded);
 *  - the log holds exactly the diffs the hosts saw, nonce by nonce (same root, same signature);
 *  - every complete answer a client got is an inference the hosts hold (its MsgStartInference);
 *  - finalize and settle succeed on the chain; the log bills what the chain paid the hosts.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { recordedDiffOf } from '../../src/gateway/session/diffs.js';
import { MODEL } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { crashEnv, freePort, readLogAt, ServeProcess } from './serve-process.js';
import { prng } from './prng.js';



interface Seen {
  /** nonce → `root|signature` as first received. */
  diffs: Map<bigint, string>;
  /** Inference ids whose MsgStartInference reached a host. */
  starts: Set<bigint>;
  /** nonce → what its diff carries that matters here. */
  kinds: Map<bigint, 'start' | 'finalize-round' | 'other'>;
}

describe('crash over the devshard protocol: the hosts see every nonce once, none skipped', () => {
  const keys = generateKeys();
  const work = mkdtempSync(join(tmpdir(), 'shardgate-crash-wire-'));
  const storage = join(work, 'storage');
  const serve = new ServeProcess(work);
  const seed = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000);
  const rnd = prng(seed);
  let devnet: Devnet;
  let base = '';
  let env: Record<string, string>;
  const seen = new Map<string, Seen>();
  const reused: string[] = [];
  const refused: string[] = [];
  const answers: { escrowId: string; nonce: number }[] = [];
  /** Waiters for a number of complete answers (the kill comes after what happened, not after a time). */
  let waiting: { n: number; resolve: () => void }[] = [];
  const answered = () => {
    const due = waiting.filter((w) => answers.length >= w.n);
    waiting = waiting.filter((w) => answers.length < w.n);
    for (const w of due) w.resolve();
  };
  const answersReach = (n: number) => new Promise<void>((resolve) => {
    waiting.push({ n, resolve });
    answered();
  });
  let chats = 0;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, creators: [keys.privateKey], env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '2' } });
    devnet.simulatedHosts.protocol.observer = (host, escrowId, diff, outcome, why) => {
      let s = seen.get(escrowId);
      if (!s) seen.set(escrowId, (s = { diffs: new Map(), starts: new Set(), kinds: new Map() }));
      const digest = `${diff.json.post_state_root}|${diff.json.user_sig}`;
      const first = s.diffs.get(diff.nonce);
      if (first === undefined) s.diffs.set(diff.nonce, digest);
      else if (first !== digest) reused.push(`escrow ${escrowId} nonce ${diff.nonce} at host ${host.index}`);
      if (outcome === 'refused') refused.push(`host ${host.index}, escrow ${escrowId}, nonce ${diff.nonce}: ${why}`);
      let kind: 'start' | 'finalize-round' | 'other' = 'other';
      for (const t of diff.txs) {
        if (t.tx.case === 'startInference') {
          kind = 'start';
          s.starts.add(t.tx.value.inferenceId);
        }
        if (t.tx.case === 'finalizeRound') kind = 'finalize-round';
      }
      s.kinds.set(diff.nonce, kind);
    };
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = {
      ...crashEnv({ port, devnetPort: 0, storage, keys }),
      NODE_RPC: devnet.rpcUrl,
      NODE_CHAIN_API: devnet.url,
      NODE_BASE: devnet.url,
      DEVSHARD_HOST_PROTOCOL: 'devshard',
    };
  }, 30_000);

  afterAll(async () => {
    await serve.kill();
    await devnet?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const headers = { authorization: `Bearer ${keys.adminApiKey}`, 'content-type': 'application/json' };
  async function api(path: string, body?: unknown) {
    const r = await fetch(base + path, { method: body === undefined ? 'GET' : 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(30_000) });
    const text = await r.text();
    return { status: r.status, text, json: text ? JSON.parse(text) : undefined };
  }

  async function chatOnce(stream: boolean, stop: AbortSignal): Promise<void> {
    chats++;
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...headers, 'x-request-id': `wire-${randomUUID()}` },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `load ${chats}` }], max_tokens: 12, stream }),
        signal: stop,
      });
      const text = await r.text();
      const complete = r.status === 200 && (stream ? text.includes('data: [DONE]') : JSON.parse(text).object === 'chat.completion');
      if (complete) {
        answers.push({ escrowId: r.headers.get('x-devshard-escrow-id')!, nonce: Number(r.headers.get('x-devshard-nonce')) });
        answered();
      }
    } catch {
      /* killed mid-request */
    }
  }

  function load(workers: number, stop: AbortSignal): Promise<void> {
    return Promise.all(
      Array.from({ length: workers }, async (_, w) => {
        for (let i = 0; i < 500 && !stop.aborted; i++) await chatOnce((w + i) % 2 === 0, stop);
      }),
    ).then(() => undefined);
  }

  const start = () => serve.start(env, `${base}/v1/status`, 20_000, ['serve']);
  const log = (): RecordedEvent[] => requestRecords(readLogAt(storage));

  it('SIGKILL under load, restarted three times, then finalize and settle: 0 reused, 0 skipped, the log is the wire', { timeout: 120_000 }, async () => {
    await start();
    const created = await api('/v1/admin/escrows', { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, register: true });
    expect(created.status, created.text).toBe(200);
    const escrowId = String(created.json.id);

    let kills = 0;
    for (let round = 0; round < 3; round++) {
      const stop = new AbortController();
      const running = load(4, stop.signal);
      // Killed once this round has some complete answers (4 to 8 of them, by the seed), whatever the machine's speed.
      await answersReach(answers.length + 4 + Math.floor(rnd() * 5));
      await serve.kill();
      kills++;
      stop.abort();
      await running;
      await start();
      expect(reused, `seed ${seed}`).toEqual([]);
      expect(refused, `seed ${seed}`).toEqual([]);
    }
    // After the last restart: chat continues right after the last used nonce.
    for (let i = 0; i < 3; i++) await chatOnce(i % 2 === 0, new AbortController().signal);

    // Finalize over the protocol (the settle route finalizes first), then settle on the chain.
    const s = seen.get(escrowId)!;
    const settled = await api(`/v1/admin/devshards/${escrowId}/settle`, {});
    expect(settled.status, settled.text).toBe(200);
    const chainEscrow = (await fetch(`${devnet.url}/productscience/inference/inference/devshard_escrow/${escrowId}`).then((x) => x.json())) as { escrow: { settled: boolean; amount: string } };
    expect(chainEscrow.escrow.settled).toBe(true);

    const records = log();
    const raw = readLogAt(storage);
    // 0 reused: never two diffs for one nonce; 0 skipped: no refusal (a gap is refused), no NoncesSkipped.
    expect(reused, `seed ${seed}`).toEqual([]);
    expect(refused, `seed ${seed}`).toEqual([]);
    // A NoncesSkipped range is only ever nonces that did go out (their diffs in the log before
    // their starts, when a kill split the two commits): each reached the hosts with its inference.
    for (const r of records.filter((x) => x.type === 'NoncesSkipped')) {
      const { from, upTo } = r.data as { from: number; upTo: number };
      for (let n = from; n <= upTo; n++) expect(seen.get(escrowId)!.starts.has(BigInt(n)), `seed ${seed}: nonce ${n} recorded as used without a start never reached a host`).toBe(true);
    }

    // The log holds exactly the diffs the hosts saw, nonce by nonce, contiguous from 1.
    const logged = raw.filter((r) => r.type === 'DevshardDiffSent').map((r) => recordedDiffOf(r.data as Parameters<typeof recordedDiffOf>[0]));
    expect(logged.map((d) => d.nonce)).toEqual(logged.map((_, i) => BigInt(i + 1)));
    expect([...s.diffs.keys()].sort((a, b) => (a < b ? -1 : 1))).toEqual(logged.map((d) => d.nonce));
    for (const d of logged) {
      const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
      expect(s.diffs.get(d.nonce), `nonce ${d.nonce}`).toBe(`${b64(d.postStateRoot)}|${b64(d.userSig)}`);
    }

    // A diff without an inference only where a request was killed before its diff was recorded.
    const neverSent = new Set(
      records
        .filter((r) => r.type === 'InferenceFailed' && /before the request left/.test((r.data as { reason: string }).reason))
        .map((r) => BigInt((r.data as { nonce: number }).nonce)),
    );
    const finalizeNonce = [...s.kinds].find(([, k]) => k === 'finalize-round')![0];
    const fillers = [...s.kinds].filter(([n, k]) => k === 'other' && n < finalizeNonce).map(([n]) => n);
    for (const n of fillers) expect(neverSent.has(n), `seed ${seed}: nonce ${n} reached the hosts without an inference`).toBe(true);

    // Every complete answer is an inference the hosts hold.
    expect(answers.length).toBeGreaterThan(10);
    for (const a of answers) expect(s.starts.has(BigInt(a.nonce)), `answer at nonce ${a.nonce}`).toBe(true);

    // The log bills what the chain paid: spent (ends and UsageRecovered) + fees + refund = deposit.
    const stream = records.filter((r) => r.streamId === `escrow-${escrowId}`);
    const spent = stream.filter((r) => r.type === 'InferenceFinished' || r.type === 'InferenceFailed' || r.type === 'UsageRecovered').reduce((n, r) => n + BigInt((r.data as { cost: string }).cost), 0n);
    const fees = BigInt((stream.filter((r) => r.type === 'EscrowFinalized').at(-1)!.data as { settlement: { fees: string } }).settlement.fees);
    const refund = BigInt((stream.find((r) => r.type === 'EscrowSettled')!.data as { refund: string }).refund);
    expect(spent + fees + refund, `seed ${seed}: deposit conserved`).toBe(BigInt(chainEscrow.escrow.amount));

    const orphans = records.filter((r) => r.type === 'InferenceFailed' && /restarted/.test((r.data as { reason: string }).reason));
    console.log(
      `crash over the protocol (seed ${seed}): ${kills} kills, ${chats} chats, ${answers.length} complete answers, ${logged.length} nonces on the wire, ` +
        `0 reused, 0 skipped; ${orphans.length} requests in flight at a kill (${neverSent.size} never sent, ${fillers.length} filled), ` +
        `${records.filter((r) => r.type === 'NoncesReleased').length} reservations released, ${records.filter((r) => r.type === 'UsageRecovered').length} usage recoveries`,
    );
  });
});
