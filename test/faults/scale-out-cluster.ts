/**
 * Gateway instances as `shardgate serve` processes on one PostgreSQL log and one devnet (issue 42),
 * for the scale-out fault tests. The devnet runs in the test's process, so its simulated hosts
 * witness every diff whatever happens to the gateways. Chat load is sent as a reverse proxy
 * would: to each instance in turn, and to the next one on a refused connection or a 503 (an
 * instance that holds no escrow of the model, or is stopping, refuses before doing anything).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { openPostgresEventStore } from '../../src/events/postgres/store.js';
import { verifyPostgresLog } from '../../src/events/postgres/verify.js';
import { MODEL } from '../helpers/gateway.js';
import { startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';
import { requestRecords } from '../helpers/request-records.js';
import { crashEnv, freePort, ServeProcess } from './serve-process.js';

export interface Answer {
  escrowId: string;
  nonce: number;
  via: string;
}

export class ScaleOutCluster {
  readonly keys = generateKeys();
  private readonly work = mkdtempSync(join(tmpdir(), 'shardgate-scale-procs-'));
  private cluster: PgCluster | undefined;
  devnet!: Devnet;
  url = '';
  private readonly procs = new Map<string, { serve: ServeProcess; base: string; env: Record<string, string> }>();
  /** Per escrow: nonce → the diff's root|signature as first seen; inference ids whose start reached a host. */
  readonly seen = new Map<string, { diffs: Map<bigint, string>; starts: Set<bigint> }>();
  readonly reused: string[] = [];
  readonly refused: string[] = [];
  readonly answers: Answer[] = [];
  /** Requests no instance answered whole (the client saw an error). */
  readonly unanswered: string[] = [];
  private waiting: { n: number; resolve: () => void }[] = [];
  private turn = 0;

  constructor(
    readonly names: readonly string[],
    readonly ttlMs: number,
  ) {}

  async setUp(): Promise<void> {
    this.cluster = await startPgCluster();
    this.url = this.cluster.url(await this.cluster.createDatabase());
    this.devnet = await startDevnet({ port: 0, creators: [this.keys.privateKey], statePath: join(this.work, 'devnet.sqlite'), env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '2' } });
    this.devnet.simulatedHosts.protocol.observer = (host, escrowId, diff, outcome, why) => {
      let s = this.seen.get(escrowId);
      if (!s) this.seen.set(escrowId, (s = { diffs: new Map(), starts: new Set() }));
      const digest = `${diff.json.post_state_root}|${diff.json.user_sig}`;
      const first = s.diffs.get(diff.nonce);
      if (first === undefined) s.diffs.set(diff.nonce, digest);
      else if (first !== digest) this.reused.push(`escrow ${escrowId} nonce ${diff.nonce} at host ${host.index}`);
      if (outcome === 'refused') this.refused.push(`host ${host.index}, escrow ${escrowId}, nonce ${diff.nonce}: ${why}`);
      for (const t of diff.txs) if (t.tx.case === 'startInference') s.starts.add(t.tx.value.inferenceId);
    };
    for (const name of this.names) {
      const port = await freePort();
      const env = {
        ...crashEnv({ port, devnetPort: 0, storage: join(this.work, name), keys: this.keys }),
        NODE_RPC: this.devnet.rpcUrl,
        NODE_CHAIN_API: this.devnet.url,
        NODE_BASE: this.devnet.url,
        DEVSHARD_STORAGE_MODE: 'postgres',
        DATABASE_URL: this.url,
        DEVSHARD_INSTANCE_NAME: name,
        DEVSHARD_LEASE_TTL_MS: String(this.ttlMs),
        GATEWAY_SHUTDOWN_TIMEOUT_MS: '10000',
        // Info lines (leases taken and handed over) in the failure messages.
        LOG_LEVEL: 'info',
      };
      this.procs.set(name, { serve: new ServeProcess(this.work), base: `http://127.0.0.1:${port}`, env });
    }
  }

  async tearDown(): Promise<void> {
    for (const p of this.procs.values()) await p.serve.kill();
    await this.devnet?.close();
    await this.cluster?.stop();
    rmSync(this.work, { recursive: true, force: true });
  }

  private proc(name: string) {
    return this.procs.get(name)!;
  }

  start(name: string): Promise<void> {
    const p = this.proc(name);
    return p.serve.start(p.env, `${p.base}/v1/status`, 30_000, ['serve']);
  }

  kill(name: string): Promise<void> {
    return this.proc(name).serve.kill();
  }

  /** SIGTERM; its exit code. */
  terminate(name: string): Promise<number | null> {
    return this.proc(name).serve.terminate();
  }

  /** Every instance's last log lines (for failure messages). */
  logs(): string {
    return this.names.map((n) => `${n}: ${this.proc(n).serve.stdout.slice(-6000)}\n${this.proc(n).serve.stderr.slice(-2000)}`).join('\n');
  }

  private readonly headers = () => ({ authorization: `Bearer ${this.keys.adminApiKey}`, 'content-type': 'application/json' });

  async api(name: string, path: string, body?: unknown): Promise<{ status: number; text: string; json: any }> {
    const r = await fetch(this.proc(name).base + path, { method: body === undefined ? 'GET' : 'POST', headers: this.headers(), body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
    const text = await r.text();
    return { status: r.status, text, json: text ? JSON.parse(text) : undefined };
  }

  /** Who holds which escrow, as the first instance that answers says. */
  async owners(): Promise<Record<string, string | null>> {
    for (const name of this.names) {
      try {
        const s = await this.api(name, '/v1/status');
        if (s.status === 200) return Object.fromEntries((s.json.devshards as { id: string; owner: string | null }[]).map((d) => [d.id, d.owner]));
      } catch {
        /* that one is down: ask the next */
      }
    }
    return {};
  }

  /** Polls `ok` (bounded); answers how long it took. */
  async until(what: string, ok: () => Promise<boolean>, ms: number): Promise<number> {
    const t0 = Date.now();
    while (!(await ok())) {
      if (Date.now() - t0 > ms) throw new Error(`not reached within ${ms} ms: ${what}\n${this.logs()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    return Date.now() - t0;
  }

  /** Resolves once `n` complete answers were received (what happens next comes after traffic, not after a time). */
  answersReach(n: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.waiting.push({ n, resolve });
      this.answered();
    });
  }

  private answered(): void {
    const due = this.waiting.filter((w) => this.answers.length >= w.n);
    this.waiting = this.waiting.filter((w) => this.answers.length < w.n);
    for (const w of due) w.resolve();
  }

  /** One chat as a reverse proxy sends it: the next instance, and the one after on a refused connection or a 503. */
  async chatOnce(stop: AbortSignal): Promise<void> {
    const first = this.turn++;
    const id = `scale-${randomUUID()}`;
    let last = '';
    for (let k = 0; k < this.names.length * 2 && !stop.aborted; k++) {
      const name = this.names[(first + k) % this.names.length]!;
      let r: Response;
      try {
        r = await fetch(`${this.proc(name).base}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...this.headers(), 'x-request-id': id },
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `load ${first}` }], max_tokens: 12, stream: first % 2 === 0 }),
          signal: stop,
        });
      } catch (err) {
        last = `${name}: ${(err as Error).message}`;
        continue; // refused (down or stopping) or reset (killed): the next instance
      }
      const text = await r.text().catch(() => '');
      if (r.status === 200 && (text.includes('data: [DONE]') || text.includes('"chat.completion"'))) {
        this.answers.push({ escrowId: r.headers.get('x-devshard-escrow-id')!, nonce: Number(r.headers.get('x-devshard-nonce')), via: name });
        this.answered();
        return;
      }
      last = `${name}: ${r.status} ${text.slice(0, 300)}`;
      if (r.status !== 503) break;
    }
    if (!stop.aborted) this.unanswered.push(`${id} (${last})`);
  }

  /** `workers` clients sending chats back to back until `stop` aborts. */
  load(workers: number, stop: AbortSignal): Promise<void> {
    return Promise.all(
      Array.from({ length: workers }, async () => {
        while (!stop.aborted) await this.chatOnce(stop);
      }),
    ).then(() => undefined);
  }

  /** Creates `n` escrows through one instance and waits until every live instance holds one. */
  async createEscrows(via: string, n: number, live: readonly string[]): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const created = await this.api(via, '/v1/admin/escrows', { amount: '10000000000', model_id: MODEL, private_key: this.keys.privateKey, register: true });
      expect(created.status, created.text).toBe(200);
      ids.push(String(created.json.id));
    }
    await this.until('each instance holds an escrow', async () => new Set(Object.values(await this.owners())).size === live.length, 30_000);
    return ids;
  }

  /** Waits until no instance among `names` has a request in flight. */
  quiet(names: readonly string[]): Promise<number> {
    return this.until('no request in flight on any instance', async () => (await Promise.all(names.map((n) => this.api(n, '/v1/status').then((s) => Number(s.json.active_requests))))).every((a) => a === 0), 60_000);
  }

  /**
   * After every escrow was settled and the instances stopped: hosts saw each nonce once and none
   * refused; the log's diffs are 1..n per escrow, exactly what the hosts saw; the money adds up
   * on chain; every complete answer is a finished request in the log and an inference the hosts hold.
   */
  async checkAll(ids: readonly string[]): Promise<void> {
    expect(this.reused).toEqual([]);
    expect(this.refused).toEqual([]);
    expect(await verifyPostgresLog(this.url)).toMatchObject({ ok: true });
    const store = await openPostgresEventStore(this.url);
    const raw: RecordedEvent[] = [];
    try {
      for await (const r of store.readAll(0)) raw.push(r);
    } finally {
      await store.close();
    }
    const records = requestRecords(raw);
    for (const id of ids) {
      const s = this.seen.get(id)!;
      const logged = raw.filter((r) => r.streamId === `devshard-session-${id}` && r.type === 'DevshardDiffSent').map((r) => BigInt((r.data as { nonce: string | number }).nonce));
      expect(logged, `escrow ${id}`).toEqual(logged.map((_, i) => BigInt(i + 1)));
      expect([...s.diffs.keys()].sort((a, b) => (a < b ? -1 : 1))).toEqual(logged);
      const stream = records.filter((r) => r.streamId === `escrow-${id}`);
      const chainEscrow = (await fetch(`${this.devnet.url}/productscience/inference/inference/devshard_escrow/${id}`).then((x) => x.json())) as { escrow: { settled: boolean; amount: string } };
      expect(chainEscrow.escrow.settled).toBe(true);
      const spent = stream.filter((r) => r.type === 'InferenceFinished' || r.type === 'InferenceFailed' || r.type === 'UsageRecovered').reduce((n, r) => n + BigInt((r.data as { cost: string }).cost), 0n);
      const fees = BigInt((stream.filter((r) => r.type === 'EscrowFinalized').at(-1)!.data as { settlement: { fees: string } }).settlement.fees);
      const refund = BigInt((stream.find((r) => r.type === 'EscrowSettled')!.data as { refund: string }).refund);
      expect(spent + fees + refund, `escrow ${id}: deposit conserved`).toBe(BigInt(chainEscrow.escrow.amount));
    }
    const finished = new Set(records.filter((r) => r.type === 'InferenceFinished').map((r) => `${r.streamId}#${(r.data as { nonce: number }).nonce}`));
    for (const a of this.answers) {
      expect(finished.has(`escrow-${a.escrowId}#${a.nonce}`), `answer ${a.escrowId}/${a.nonce} via ${a.via}`).toBe(true);
      expect(this.seen.get(a.escrowId)!.starts.has(BigInt(a.nonce))).toBe(true);
    }
  }

  /** Settles every escrow through one instance (it claims each from its holder). */
  async settleAll(via: string, ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      const settled = await this.api(via, `/v1/admin/devshards/${id}/settle`, {});
      expect(settled.status, `${settled.text}\n${this.logs()}`).toBe(200);
    }
  }
}
