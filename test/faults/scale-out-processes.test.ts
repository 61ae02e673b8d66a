/**
 * Three `shardgate serve` processes on one PostgreSQL log and one devnet (issue 42), under chat
 * load spread across them as a reverse proxy would (the next instance on a refused connection or
 * a 503 that names another instance). The devnet runs in this test's process, so its simulated
 * hosts witness every diff across the kills. One instance is SIGKILLed: its escrow is served by
 * the others once its lease expired. One is stopped with SIGTERM (it hands its escrows over at
 * once) and started again (it gets its share back by hand-over). Then every escrow is settled
 * through one instance, and:
 *  - every host saw each escrow's nonces once and contiguously (no diff refused, none reused);
 *  - every complete answer a client got is a finished request in the log and an inference the hosts hold;
 *  - `verify` passes on the shared log;
 *  - the money adds up on chain: per escrow, what the log billed + fees + refund = the deposit.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { openPostgresEventStore } from '../../src/events/postgres/store.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { MODEL } from '../helpers/gateway.js';
import { startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';
import { requestRecords } from '../helpers/request-records.js';
import { crashEnv, freePort, ServeProcess } from './serve-process.js';

const TTL_MS = 2_000;
const NAMES = ['g1', 'g2', 'g3'] as const;

describe('three instances on one PostgreSQL log: SIGKILL, SIGTERM and restart under load', () => {
  const keys = generateKeys();
  const work = mkdtempSync(join(tmpdir(), 'shardgate-scale-procs-'));
  let cluster: PgCluster;
  let devnet: Devnet;
  let url = '';
  const procs = new Map<string, { serve: ServeProcess; base: string; env: Record<string, string> }>();
  /** Per escrow: nonce → the diff's root|signature as first seen; inference ids whose start reached a host. */
  const seen = new Map<string, { diffs: Map<bigint, string>; starts: Set<bigint> }>();
  const reused: string[] = [];
  const refused: string[] = [];
  const answers: { escrowId: string; nonce: number; via: string }[] = [];
  let waiting: { n: number; resolve: () => void }[] = [];
  const answered = () => {
    const due = waiting.filter((w) => answers.length >= w.n);
    waiting = waiting.filter((w) => answers.length < w.n);
    for (const w of due) w.resolve();
  };
  const answersReach = (n: number) =>
    new Promise<void>((resolve) => {
      waiting.push({ n, resolve });
      answered();
    });
  let unanswered = 0;

  beforeAll(async () => {
    cluster = await startPgCluster();
    url = cluster.url(await cluster.createDatabase());
    devnet = await startDevnet({ port: 0, creators: [keys.privateKey], statePath: join(work, 'devnet.sqlite'), env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '2' } });
    devnet.simulatedHosts.protocol.observer = (host, escrowId, diff, outcome, why) => {
      let s = seen.get(escrowId);
      if (!s) seen.set(escrowId, (s = { diffs: new Map(), starts: new Set() }));
      const digest = `${diff.json.post_state_root}|${diff.json.user_sig}`;
      const first = s.diffs.get(diff.nonce);
      if (first === undefined) s.diffs.set(diff.nonce, digest);
      else if (first !== digest) reused.push(`escrow ${escrowId} nonce ${diff.nonce} at host ${host.index}`);
      if (outcome === 'refused') refused.push(`host ${host.index}, escrow ${escrowId}, nonce ${diff.nonce}: ${why}`);
      for (const t of diff.txs) if (t.tx.case === 'startInference') s.starts.add(t.tx.value.inferenceId);
    };
    for (const name of NAMES) {
      const port = await freePort();
      const storage = join(work, name);
      const env = {
        ...crashEnv({ port, devnetPort: 0, storage, keys }),
        NODE_RPC: devnet.rpcUrl,
        NODE_CHAIN_API: devnet.url,
        NODE_BASE: devnet.url,
        DEVSHARD_STORAGE_MODE: 'postgres',
        DATABASE_URL: url,
        DEVSHARD_INSTANCE_NAME: name,
        DEVSHARD_LEASE_TTL_MS: String(TTL_MS),
        GATEWAY_SHUTDOWN_TIMEOUT_MS: '10000',
        // Info lines (leases taken and handed over) in the failure messages.
        LOG_LEVEL: 'info',
      };
      procs.set(name, { serve: new ServeProcess(work), base: `http://127.0.0.1:${port}`, env });
    }
  }, 60_000);

  afterAll(async () => {
    for (const p of procs.values()) await p.serve.kill();
    await devnet?.close();
    await cluster?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  const start = (name: string) => procs.get(name)!.serve.start(procs.get(name)!.env, `${procs.get(name)!.base}/v1/status`, 30_000, ['serve']);
  const headers = { authorization: `Bearer ${keys.adminApiKey}`, 'content-type': 'application/json' };
  async function api(name: string, path: string, body?: unknown) {
    const r = await fetch(procs.get(name)!.base + path, { method: body === undefined ? 'GET' : 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
    const text = await r.text();
    return { status: r.status, text, json: text ? JSON.parse(text) : undefined };
  }

  /** Who holds which escrow, as one live instance's /v1/status says. */
  async function owners(): Promise<Record<string, string | null>> {
    for (const name of NAMES) {
      try {
        const s = await api(name, '/v1/status');
        if (s.status === 200) return Object.fromEntries((s.json.devshards as { id: string; owner: string | null }[]).map((d) => [d.id, d.owner]));
      } catch {
        /* that one is down: ask the next */
      }
    }
    return {};
  }

  async function until(what: string, ok: () => Promise<boolean>, ms: number): Promise<number> {
    const t0 = Date.now();
    while (!(await ok())) {
      if (Date.now() - t0 > ms) throw new Error(`not reached within ${ms} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return Date.now() - t0;
  }

  let turn = 0;
  /** One chat as a reverse proxy sends it: the next instance, and the one after on a refusal it may retry. */
  async function chatOnce(stop: AbortSignal): Promise<void> {
    const first = turn++;
    for (let k = 0; k < NAMES.length && !stop.aborted; k++) {
      const name = NAMES[(first + k) % NAMES.length]!;
      let r: Response;
      try {
        r = await fetch(`${procs.get(name)!.base}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...headers, 'x-request-id': `scale-${randomUUID()}` },
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `load ${first}` }], max_tokens: 12, stream: first % 2 === 0 }),
          signal: stop,
        });
      } catch {
        continue; // connection refused (down) or reset (killed): the next instance
      }
      const text = await r.text().catch(() => '');
      if (r.status === 200 && (text.includes('data: [DONE]') || text.includes('"chat.completion"'))) {
        answers.push({ escrowId: r.headers.get('x-devshard-escrow-id')!, nonce: Number(r.headers.get('x-devshard-nonce')), via: name });
        answered();
        return;
      }
      if (r.status !== 503) break;
    }
    if (!stop.aborted) unanswered++;
  }

  function load(workers: number, stop: AbortSignal): Promise<void> {
    return Promise.all(Array.from({ length: workers }, async () => {
      while (!stop.aborted) await chatOnce(stop);
    })).then(() => undefined);
  }

  it('serves through a SIGKILL, a SIGTERM and a restart; nonces contiguous on every host; the money adds up', { timeout: 240_000 }, async () => {
    for (const name of NAMES) await start(name);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await api('g1', '/v1/admin/escrows', { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, register: true });
      expect(created.status, created.text).toBe(200);
      ids.push(String(created.json.id));
    }
    await until('each instance holds one escrow', async () => new Set(Object.values(await owners())).size === 3, 30_000);

    const stop = new AbortController();
    const running = load(6, stop.signal);
    await answersReach(15);

    // SIGKILL g2: its escrow is served by the others once its lease expired.
    const killedEscrow = Object.entries(await owners()).find(([, o]) => o === 'g2')![0];
    await procs.get('g2')!.serve.kill();
    const takeover = await until('the killed instance\'s escrow is held by another', async () => ['g1', 'g3'].includes((await owners())[killedEscrow] ?? ''), 10 * TTL_MS);
    const before = answers.length;
    await answersReach(before + 10);
    expect(answers.slice(before).some((a) => a.escrowId === killedEscrow), 'the killed instance\'s escrow serves again').toBe(true);

    // SIGTERM g3 (drains, hands over at once), then start it again: it gets its share back.
    expect(await procs.get('g3')!.serve.terminate()).toBe(0);
    await answersReach(answers.length + 5);
    await start('g3');
    await until('g3 holds an escrow again', async () => Object.values(await owners()).includes('g3'), 30_000);
    await answersReach(answers.length + 10);
    stop.abort();
    await running;
    const quiet = await until('no request in flight on any instance', async () => {
      const active = await Promise.all(['g1', 'g3'].map((n) => api(n, '/v1/status').then((s) => Number(s.json.active_requests))));
      return active.every((a) => a === 0);
    }, 60_000);

    // Settle every escrow through g1 (it claims each from its holder).
    for (const id of ids) {
      const settled = await api('g1', `/v1/admin/devshards/${id}/settle`, {});
      expect(settled.status, `${settled.text}\n${NAMES.map((n) => `${n}: ${procs.get(n)!.serve.stdout.slice(-12000)}`).join('\n')}`).toBe(200);
    }
    for (const name of ['g1', 'g3']) expect(await procs.get(name)!.serve.terminate()).toBe(0);

    expect(reused).toEqual([]);
    expect(refused).toEqual([]);
    expect(await verifyPostgresLog(url)).toMatchObject({ ok: true });
    const store = await openPostgresEventStore(url);
    const raw: RecordedEvent[] = [];
    try {
      for await (const r of store.readAll(0)) raw.push(r);
    } finally {
      await store.close();
    }
    const records = requestRecords(raw);
    for (const id of ids) {
      const s = seen.get(id)!;
      // Contiguous on the wire: the log's diffs are 1..n, exactly what the hosts saw.
      const logged = raw.filter((r) => r.streamId === `devshard-session-${id}` && r.type === 'DevshardDiffSent').map((r) => BigInt((r.data as { nonce: string | number }).nonce));
      expect(logged, `escrow ${id}`).toEqual(logged.map((_, i) => BigInt(i + 1)));
      expect([...s.diffs.keys()].sort((a, b) => (a < b ? -1 : 1))).toEqual(logged);
      // The money: billed + fees + refund = deposit.
      const stream = records.filter((r) => r.streamId === `escrow-${id}`);
      const chainEscrow = (await fetch(`${devnet.url}/productscience/inference/inference/devshard_escrow/${id}`).then((x) => x.json())) as { escrow: { settled: boolean; amount: string } };
      expect(chainEscrow.escrow.settled).toBe(true);
      const spent = stream.filter((r) => r.type === 'InferenceFinished' || r.type === 'InferenceFailed' || r.type === 'UsageRecovered').reduce((n, r) => n + BigInt((r.data as { cost: string }).cost), 0n);
      const fees = BigInt((stream.filter((r) => r.type === 'EscrowFinalized').at(-1)!.data as { settlement: { fees: string } }).settlement.fees);
      const refund = BigInt((stream.find((r) => r.type === 'EscrowSettled')!.data as { refund: string }).refund);
      expect(spent + fees + refund, `escrow ${id}: deposit conserved`).toBe(BigInt(chainEscrow.escrow.amount));
    }
    // Every complete answer is a finished request in the log and an inference the hosts hold.
    const finished = new Set(records.filter((r) => r.type === 'InferenceFinished').map((r) => `${r.streamId}#${(r.data as { nonce: number }).nonce}`));
    for (const a of answers) {
      expect(finished.has(`escrow-${a.escrowId}#${a.nonce}`), `answer ${a.escrowId}/${a.nonce} via ${a.via}`).toBe(true);
      expect(seen.get(a.escrowId)!.starts.has(BigInt(a.nonce))).toBe(true);
    }
    console.log(`3 instances: ${answers.length} complete answers, no request in flight ${quiet} ms after the load stopped (${unanswered} not answered: in flight at the SIGKILL), takeover ${takeover} ms after the kill (lease ${TTL_MS} ms)`);
  });
});
