/**
 * A gateway *process* (`shardgate serve`, embedded devnet in the same process) under chat load over
 * the devshard host protocol, SIGKILLed at random moments — during chat, during an escrow create
 * and during a settle — and restarted on the same storage. After each restart:
 *  - `shardgate verify` passes (hash chain, versions, projections checkpoint vs rebuild, and every
 *    escrow's devshard session replayed from its recorded diffs);
 *  - every chat that got a complete answer (non-stream 200, or a stream up to [DONE]) is in the
 *    log: its InferenceFinished (matched by x-request-id = event metadata requestId), or, when the
 *    kill came before that commit (the client does not wait for it), the restart's record of it:
 *    its start ended as an orphan, or its nonce recorded as used without a start (NoncesSkipped:
 *    exactly the nonces whose diffs the log holds above the last recorded start);
 *  - no nonce is ever used twice per escrow, across all restarts: strictly increasing in the log,
 *    and no two answers the clients got carry the same escrow and nonce;
 *  - projections rebuilt from the log equal the live /v1/status;
 *  - recorded chain intents are reconciled: each create intent ends in exactly one outcome and
 *    the chain holds exactly the escrows the log created; a settle interrupted by the kill ends
 *    settled exactly once (never a second settle tx refused as already settled).
 * At the end every escrow is finalized and settled over the protocol (every slot signs) and on
 * chain deposit = host costs + fees + refund, with the log's bill (ends, and UsageRecovered for
 * what a host's Finish charged beyond them) equal to the host costs the chain paid.
 *
 * The devnet dies with the process: its chain persists each block that changed state, and its
 * hosts the diffs they applied (DEVNET_STATE), but their mempools are lost, as a real host's would
 * be if it died too. Host txs the gateway had taken from answers (the executors' ConfirmStart and
 * Finish) are in its log (DevshardHostTxsReceived), so they still reach a diff; the wire-level
 * view, with hosts that outlive the gateway, is crash-protocol-wire.test.ts.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { Projections } from '../../src/projections/projections.js';
import { ensureBuilt, repoRoot } from '../helpers/store-dist.js';
import { crashEnv, findLogEvent, freePort, lastLogPosition, readLogAt, ServeProcess } from './serve-process.js';
import { waitFor } from './helpers.js';
import { MODEL } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { prng } from './prng.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


interface ChatRecord {
  requestId: string;
  status: number;
  complete: boolean;
  escrowId?: string;
  nonce?: number;
}

describe('crash: SIGKILL under load, restart on the same storage', () => {
  const keys = generateKeys();
  const work = mkdtempSync(join(tmpdir(), 'shardgate-crash-'));
  const storage = join(work, 'storage');
  const serve = new ServeProcess(work);
  let base = '';
  const seed = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000);
  const rnd = prng(seed);
  const chats: ChatRecord[] = [];

  afterAll(async () => {
    await serve.kill();
    rmSync(work, { recursive: true, force: true });
  });

  const start = (env: Record<string, string>) => serve.start(env, `${base}/v1/status`);
  const kill = () => serve.kill();

  const headers = (key = keys.adminApiKey) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });
  async function api(path: string, body?: unknown, method = body === undefined ? 'GET' : 'POST') {
    const r = await fetch(base + path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
    const text = await r.text();
    return { status: r.status, json: text ? JSON.parse(text) : undefined, text };
  }

  /** One chat; records whether a complete answer arrived. Never throws. */
  async function chatOnce(stream: boolean, stop: AbortSignal): Promise<void> {
    const requestId = `crash-${randomUUID()}`;
    const rec: ChatRecord = { requestId, status: 0, complete: false };
    chats.push(rec);
    try {
      const r = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...headers(), 'x-request-id': requestId },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `load ${requestId}` }], max_tokens: 16, stream }),
        signal: stop,
      });
      rec.status = r.status;
      expect(r.headers.get('x-request-id')).toBe(requestId);
      if (r.status === 200) {
        rec.escrowId = r.headers.get('x-devshard-escrow-id') ?? undefined;
        rec.nonce = Number(r.headers.get('x-devshard-nonce'));
      }
      const text = await r.text();
      if (r.status === 200) rec.complete = stream ? text.includes('data: [DONE]') : JSON.parse(text).object === 'chat.completion';
    } catch {
      /* killed mid-request: no answer */
    }
    if (rec.complete) answeredNow();
  }

  /** Complete answers so far, and who waits for a count of them. */
  let completeAnswers = 0;
  const answerWaiters: { n: number; wake: () => void }[] = [];
  function answeredNow(): void {
    completeAnswers++;
    for (const w of answerWaiters.filter((w) => completeAnswers >= w.n)) {
      answerWaiters.splice(answerWaiters.indexOf(w), 1);
      w.wake();
    }
  }

  /**
   * Resolves once `n` complete answers arrived in all (an event of the load, not a time): the kill
   * comes after the load really served. Rejects if the load ended first (the gateway stopped answering).
   */
  function untilAnswered(n: number, running: Promise<void>): Promise<void> {
    const reached = new Promise<void>((wake) => (completeAnswers >= n ? wake() : answerWaiters.push({ n, wake })));
    const ended = running.then(() => {
      if (completeAnswers < n) throw new Error(`the chat load ended with ${completeAnswers} complete answers, ${n} awaited (seed ${seed})`);
    });
    return Promise.race([reached, ended]);
  }

  /** Chat load from `workers` loops until `stop` aborts. */
  function load(workers: number, stop: AbortSignal): Promise<void> {
    const loops = Array.from({ length: workers }, async (_, w) => {
      for (let i = 0; i < 500 && !stop.aborted; i++) await chatOnce((w + i) % 2 === 0, stop);
    });
    return Promise.all(loops).then(() => undefined);
  }

  /** The log, one record per request start or end (requestRecords). */
  const readLog = () => requestRecords(readLogAt(storage));

  async function verifyCli(): Promise<string> {
    try {
      const { stdout } = await run(process.execPath, [ensureBuilt('dist/src/cli/main.js'), 'verify', '--storage', storage], { cwd: repoRoot });
      return stdout;
    } catch (e) {
      throw new Error(`verify failed after a crash (seed ${seed}): ${(e as { stdout?: string }).stdout}`, { cause: e });
    }
  }

  /** Everything the gateway promises, checked against the log and the live API. */
  async function checkInvariants(phase: string): Promise<RecordedEvent[]> {
    const ctx = `${phase} (seed ${seed})`;
    // chain intents left open by the kill are resolved by the start-up and background reconcilers
    let raw = readLogAt(storage);
    // A bound for a hang, not a guess of how long the reconcilers take (they run every 200 ms).
    const deadline = Date.now() + 30_000;
    for (;;) {
      const p = Projections.rebuild(raw);
      const unresolved = p.pool.pending().length + p.pool.all().filter((e) => e.state === 'settling').length;
      if (unresolved === 0) break;
      if (Date.now() > deadline) throw new Error(`${ctx}: chain intents still unresolved`);
      await sleep(200);
      raw = readLogAt(storage);
    }
    const log = requestRecords(raw);
    expect(await verifyCli(), ctx).toMatch(/^ok: \d+ events verified/);

    // every complete answer is in the log: finished, or recorded by the restart after a kill that
    // came before its commit (skipped nonce, or an orphan ended at start-up)
    const finished = new Set(log.filter((r) => r.type === 'InferenceFinished').map((r) => (r.data as { requestId: string }).requestId));
    const orphaned = new Set(log.filter((r) => r.type === 'InferenceFailed' && /restarted/.test((r.data as { reason: string }).reason)).map((r) => (r.data as { requestId: string }).requestId));
    const skipped = log.filter((r) => r.type === 'NoncesSkipped').map((r) => ({ streamId: r.streamId, ...(r.data as { from: number; upTo: number }) }));
    const inSkipped = (c: ChatRecord) => skipped.some((s) => s.streamId === `escrow-${c.escrowId}` && c.nonce! >= s.from && c.nonce! <= s.upTo);
    const lost = chats.filter((c) => c.complete && !finished.has(c.requestId) && !orphaned.has(c.requestId) && !inSkipped(c));
    expect(lost, `${ctx}: answered requests the log does not account for`).toEqual([]);
    // no two answers carry the same escrow and nonce (covers requests whose start never reached the log)
    const answered = chats.filter((c) => c.status === 200 && c.escrowId).map((c) => `${c.escrowId}/${c.nonce}`);
    expect(answered.length - new Set(answered).size, `${ctx}: a nonce was answered twice`).toBe(0);

    // no nonce used twice: per escrow, InferenceStarted nonces strictly increase in log order
    const last = new Map<string, number>();
    for (const r of log) {
      if (r.type !== 'InferenceStarted') continue;
      const n = (r.data as { nonce: number }).nonce;
      expect(n, `${ctx}: nonce reuse on ${r.streamId}`).toBeGreaterThan(last.get(r.streamId) ?? 0);
      last.set(r.streamId, n);
    }
    // every started request ended exactly once (orphans are ended by the reconciler)
    const ends = new Map<string, number>();
    for (const r of log) if (r.type === 'InferenceFinished' || r.type === 'InferenceFailed') ends.set(`${r.streamId}/${(r.data as { requestId: string }).requestId}`, (ends.get(`${r.streamId}/${(r.data as { requestId: string }).requestId}`) ?? 0) + 1);
    for (const r of log) if (r.type === 'InferenceStarted') expect(ends.get(`${r.streamId}/${(r.data as { requestId: string }).requestId}`), `${ctx}: request ended once`).toBe(1);

    // rebuilt projections equal the live status
    const rebuilt = Projections.rebuild(raw).status.snapshot();
    const live = (await api('/v1/status')).json;
    // The prune point and chain phase fields come from the chain's epoch (prune-watch.ts); the
    // protocol fields from the escrow's first event and the live session (status-document.ts), not
    // from the status projection.
    const NOT_FROM_LOG = ['prune_epoch', 'settle_deadline_epoch', 'blocks_until_prune', 'chain_phase', 'confirmation_poc_phase', 'protocol_version', 'route_prefix', 'state_root_version', 'hosts_applied', 'protocol_error'];
    const fromLog = (d: Record<string, unknown>) => Object.fromEntries(Object.entries(d).filter(([f]) => !NOT_FROM_LOG.includes(f)));
    live.devshards = (live.devshards as Record<string, unknown>[]).map(fromLog);
    for (const [k, v] of Object.entries(rebuilt)) expect(live[k], `${ctx}: /v1/status.${k}`).toEqual(v);

    // creates: one outcome per intent; the chain holds exactly the escrows the log created
    const created = log.filter((r) => r.type === 'EscrowCreated');
    const intents = log.filter((r) => r.type === 'EscrowCreateRequested').map((r) => (r.data as { intentId: string }).intentId);
    for (const id of intents) {
      const outcomes = log.filter((r) => (r.type === 'EscrowCreated' || r.type === 'EscrowCreateFailed') && (r.data as { intentId?: string }).intentId === id);
      expect(outcomes.length, `${ctx}: outcomes of intent ${id}`).toBe(1);
    }
    const ids = created.map((r) => (r.data as { escrowId: string }).escrowId);
    expect(new Set(ids).size, `${ctx}: duplicate EscrowCreated`).toBe(ids.length);
    let onChain = 0;
    for (let id = 1; id <= ids.length + 3; id++) {
      const r = await fetch(`${devnetUrl}/productscience/inference/inference/devshard_escrow/${id}`).then((x) => x.json() as Promise<{ found: boolean }>);
      if (r.found) onChain++;
    }
    expect(onChain, `${ctx}: escrows on chain vs created in the log`).toBe(ids.length);

    // settles: at most one EscrowSettled per escrow, never a refused duplicate settle
    for (const id of ids) {
      const stream = log.filter((r) => r.streamId === `escrow-${id}`);
      expect(stream.filter((r) => r.type === 'EscrowSettled').length, `${ctx}: settled count of ${id}`).toBeLessThanOrEqual(1);
      const refused = stream.filter((r) => r.type === 'EscrowSettleFailed' && /already/i.test(JSON.stringify(r.data)));
      expect(refused, `${ctx}: a second settle was sent for ${id}`).toEqual([]);
    }
    return log;
  }

  let devnetUrl = '';

  it('keeps every promise across several SIGKILLs', { timeout: 120_000 }, async () => {
    const port = await freePort();
    const devnetPort = await freePort();
    base = `http://127.0.0.1:${port}`;
    devnetUrl = `http://127.0.0.1:${devnetPort}`;
    const env = crashEnv({ port, devnetPort, storage, keys });
    await start(env); // the quick start creates a first escrow on the empty log
    let log = readLog();
    expect(log.some((r) => r.type === 'EscrowCreated')).toBe(true);

    // Each cycle kills after at least this many more complete answers (more at random): what the
    // final count of answers is checked against.
    const MIN_ANSWERS_PER_CYCLE = 3;
    let driven = 0;
    /**
     * Chat load, then the kill: once `MIN_ANSWERS_PER_CYCLE` to twice that more answers arrived
     * (drawn from the seed), and with `during` (a chain command) once one of the log records drawn
     * from `killAt` is written (or the command ended first): the kill lands at a step of the command
     * the test chose, not at a guessed moment.
     */
    const cycle = async (name: string, during?: { run: () => Promise<unknown>; killAt: string[][] }) => {
      const stop = new AbortController();
      const running = load(4, stop.signal);
      const more = MIN_ANSWERS_PER_CYCLE + Math.floor(rnd() * (MIN_ANSWERS_PER_CYCLE + 1));
      driven += more;
      await untilAnswered(completeAnswers + more, running);
      if (during) {
        const types = during.killAt[Math.floor(rnd() * during.killAt.length)]!;
        const from = lastLogPosition(storage);
        let ended = false;
        void during.run().catch(() => undefined).finally(() => (ended = true));
        await waitFor(() => ended || findLogEvent(storage, types, from) !== undefined, `${name}: ${types.join(' or ')} in the log (seed ${seed})`, 30_000, 10);
      }
      await kill();
      stop.abort();
      await running;
      await start(env);
      return checkInvariants(name);
    };

    // 1. plain chat load
    await cycle('kill during chat');
    // 2. kill during an escrow create (and chat)
    // The intent recorded (its tx on the way or not), or the outcome too.
    await cycle('kill during create', {
      run: () => api('/v1/admin/escrows', { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, chain_id: 'shardgate-devnet', register: true }),
      killAt: [['EscrowCreateRequested'], ['EscrowCreated', 'EscrowCreateFailed']],
    });
    const escrows = () => Projections.rebuild(readLogAt(storage)).pool.all();
    if (escrows().filter((e) => e.state === 'active').length < 2) {
      expect((await api('/v1/admin/escrows', { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, chain_id: 'shardgate-devnet', register: true })).status).toBe(200);
    }
    // 3. kill during a settle (chat keeps running on the other escrow)
    const first = escrows().find((e) => e.state === 'active')!.escrowId;
    // Finalized but not yet settled, the settle tx recorded (sent or not), or settled.
    await cycle('kill during settle', {
      run: async () => {
        const f = await api(`/devshard/${first}/v1/finalize`, {});
        if (f.status === 200) await api(`/v1/admin/devshards/${first}/settle`, {});
      },
      killAt: [['EscrowFinalized'], ['EscrowSettleRequested'], ['EscrowSettled', 'EscrowSettleFailed']],
    });
    // 4. one more kill under load
    await cycle('kill during chat again');

    // finally: everything finalizes and settles; the hosts sign; money is conserved on chain
    for (const e of escrows()) {
      if (e.state === 'settled') continue;
      if (e.state !== 'finalized' && e.state !== 'settleDeferred') {
        const f = await api(`/devshard/${e.escrowId}/v1/finalize`, {});
        expect(f.status, `finalize ${e.escrowId} (seed ${seed}): ${f.text}`).toBe(200);
      }
      const s = await api(`/v1/admin/devshards/${e.escrowId}/settle`, {});
      expect(s.status, `settle ${e.escrowId} (seed ${seed}): ${s.text}`).toBe(200);
    }
    log = await checkInvariants('after final settles');
    for (const e of escrows()) {
      expect(e.state).toBe('settled');
      const chainEscrow = (await fetch(`${devnetUrl}/productscience/inference/inference/devshard_escrow/${e.escrowId}`).then((x) => x.json())) as { escrow: { settled: boolean; amount: string } };
      expect(chainEscrow.escrow.settled).toBe(true);
      const stream = log.filter((r) => r.streamId === `escrow-${e.escrowId}`);
      const settled = stream.find((r) => r.type === 'EscrowSettled')!.data as { refund: string };
      // what the log bills: ended requests, plus usage the hosts reported after a kill (UsageRecovered)
      const spent = stream.filter((r) => r.type === 'InferenceFinished' || r.type === 'InferenceFailed' || r.type === 'UsageRecovered').reduce((n, r) => n + BigInt((r.data as { cost: string }).cost), 0n);
      const fees = BigInt(((stream.filter((r) => r.type === 'EscrowFinalized').at(-1)!.data as { settlement: { fees: string } }).settlement.fees));
      expect(spent + fees + BigInt(settled.refund), `deposit of ${e.escrowId} conserved`).toBe(BigInt(chainEscrow.escrow.amount));
    }
    const answered = chats.filter((c) => c.complete).length;
    // Each cycle waited for its answers before its kill: at least those, every one accounted for above.
    expect(answered).toBeGreaterThanOrEqual(driven);
    const orphans = log.filter((r) => r.type === 'InferenceFailed' && /restarted/.test((r.data as { reason: string }).reason));
    const skips = log.filter((r) => r.type === 'NoncesSkipped').length;
    const released = log.filter((r) => r.type === 'NoncesReleased').length;
    const recovered = log.filter((r) => r.type === 'UsageRecovered').length;
    console.log(
      `crash test (seed ${seed}): ${chats.length} chats, ${answered} complete answers, ${orphans.length} requests in flight at a kill, ` +
        `${released} reservations released, ${skips} ranges of nonces sent without a recorded start, ${recovered} usage recoveries from hosts' Finish, ${log.length} events`,
    );
    await kill();
  });
});
