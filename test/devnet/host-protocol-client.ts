/**
 * A small devshard protocol client for the host-protocol tests, built from src/protocol and
 * src/network/devshard only: composes and signs each diff, signs the request header, sends every
 * host the diffs it has not acknowledged (catch-up), checks each receipt's state_hash against its
 * own replica and takes host txs from receipts and mempools into later diffs. Also the test net:
 * a fastify app on loopback with the simulated hosts over an in-memory chain view. The client
 * speaks one version's route (default the newest, `/devshard/v4.1`) and hashes that version's name
 * as its state-root tag, as the hosts' sessions under that route do.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import Fastify, { type FastifyInstance } from 'fastify';
import { registerSimulatedHosts, type SimulatedHosts } from '../../src/devnet/hosts/index.js';
import type { BlockHeader, DevnetChainView, DevnetEscrowView, HostIdentity } from '../../src/devnet/hosts/chain-view.js';
import { HOST_VERSION_NAMES, hostRules } from '../../src/devnet/hosts/protocol/host-versions.js';
import type { HostSessionStore } from '../../src/devnet/hosts/protocol/session.js';
import type { HostFaults } from '../../src/devnet/hosts/faults.js';
import { readHostEvent, type HostEvent, type HostReceipt } from '../../src/network/devshard/host-events.js';
import { inferenceRequestJson, sessionUrl, type InferencePayload, type SignedDiff } from '../../src/network/devshard/request-body.js';
import {
  bytesEqual,
  canonicalPromptHash,
  composeDiff,
  requestHeaderMessage,
  signDiff,
  signMessage,
  sha256,
  toHex,
  Replica,
  applyChainBindParams,
  sessionConfigFromEscrow,
  type ChainBindParams,
  type Diff,
  type EscrowSessionFields,
} from '../../src/protocol/index.js';
import { DevshardTxSchema, type DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { NEWEST_VERSION, versionOfRoute } from '../../src/protocol/versions.js';
import { MsgConfirmStartSchema, MsgFinalizeRoundSchema, MsgStartInferenceSchema } from '../../src/protocol/gen/devshard/v1/tx_pb.js';
import { newKey, type Key } from '../network/fixtures.js';

export const MODEL = 'Qwen/Test-Model';

export interface TestNet {
  app: FastifyInstance;
  base: string;
  creator: Key;
  hosts: HostIdentity[];
  sim: SimulatedHosts;
  faults: HostFaults;
  escrow: DevnetEscrowView;
  bind: ChainBindParams;
  /** The hosts' clock is Date.now() + offsetMs (the client signs with the same clock). */
  clock: { offsetMs: number };
  /** The chain's latest height the hosts' block oracle reads (with `oracle`); tests move it. */
  chainTip: { height: bigint };
  /** The header at a height, as the hosts' oracle reports it (hash = sha256("testnet/block/<h>")). */
  header(height: bigint): BlockHeader;
  /** The chain view the hosts read (a second mount of the same hosts, as after a restart, reads it too). */
  chain: DevnetChainView;
  hostUrl(i: number): string;
  /** The route prefix the clients speak by default (`/devshard/<version>`, or `/v1/devshard`). */
  route: string;
  /** The version that route serves: the state-root tag the clients hash by default. */
  version: string;
  close(): Promise<void>;
}

export interface TestNetOptions {
  hosts?: number;
  slotsOf?: number[];
  tokenDelayMs?: number;
  /** The clients' route prefix; default `/devshard/<newest version>`. */
  route?: string;
  /** The versions the hosts serve (SimulatedHostsOptions.versions); default every version they serve (ours and v5). */
  versions?: readonly string[];
  /** Give the hosts a block oracle (the chain's latest block; v5 stamps and Anchors). Default off. */
  oracle?: boolean;
  /** Where the hosts keep the diffs they apply (SimulatedHostsOptions.sessionStore). */
  sessionStore?: HostSessionStore;
  /**
   * Keep `/v1/devshard` for v2 (SimulatedHostsOptions.legacyRoute). Default on here (the hosts'
   * own default is off, as on the live network) so that tests whose escrows still speak v2 on the
   * legacy route (test/network/devshard: LEGACY_PROTOCOL) keep running; false gives the 410.
   */
  legacyRoute?: boolean;
}

export const SESSION: EscrowSessionFields = { tokenPrice: 3n, createDevshardFee: 500n, feePerNonce: 10n };
export const BIND: ChainBindParams = { refusalTimeout: 60n, executionTimeout: 120n, voteThresholdFactor: 0, validationRate: 0 };

export async function startTestNet(opts: TestNetOptions = {}): Promise<TestNet> {
  const route = opts.route ?? `/devshard/${NEWEST_VERSION}`;
  const version = versionOfRoute(route) ?? route.split('/').pop()!;
  const creator = newKey();
  const keys = Array.from({ length: opts.hosts ?? 3 }, () => newKey());
  const hosts: HostIdentity[] = keys.map((k, index) => ({ index, address: k.address, privateKey: k.privateKey, pubKey: k.pubKey, prefix: `/hosts/${index}` }));
  const app = Fastify({ logger: false });
  const escrows = new Map<string, DevnetEscrowView>();
  const chainTip = { height: 1000n };
  const header = (height: bigint): BlockHeader => ({ chainId: 'gonka-testnet', height, hash: sha256(new TextEncoder().encode(`testnet/block/${height}`)) });
  const chain: DevnetChainView = {
    escrow: (id) => escrows.get(id),
    tokenPrice: () => 3n,
    sessionBindParams: () => BIND,
    ...(opts.oracle ? { latestBlock: () => header(chainTip.height), blockAt: (h: bigint) => (h >= 1n && h <= chainTip.height ? header(h) : undefined) } : {}),
  };
  const faults: HostFaults = {};
  const clock = { offsetMs: 0 };
  const sim = registerSimulatedHosts(app, {
    chain,
    hosts,
    tokenDelayMs: opts.tokenDelayMs ?? 0,
    faults,
    now: () => Date.now() + clock.offsetMs,
    versions: opts.versions ?? HOST_VERSION_NAMES,
    legacyRoute: opts.legacyRoute ?? true,
    ...(opts.sessionStore ? { sessionStore: opts.sessionStore } : {}),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;
  const hostUrl = (i: number): string => `${base}/hosts/${i}`;
  const slotHosts = opts.slotsOf ?? hosts.map((h) => h.index);
  const escrow: DevnetEscrowView = {
    id: '42',
    creator: creator.address,
    modelId: MODEL,
    settled: false,
    epochIndex: 1,
    slots: slotHosts.map((hi, slotId) => ({ slotId, host: hosts[hi]!.address, url: hostUrl(hi) })),
    amount: 1_000_000n,
    session: SESSION,
  };
  escrows.set(escrow.id, escrow);
  return { app, base, creator, hosts, sim, faults, escrow, bind: BIND, clock, chainTip, header, chain, hostUrl, route, version, close: () => app.close() };
}

/** One captured request (for the realnet capture and for inspection). */
export interface Captured {
  url: string;
  headers: Record<string, string>;
  body: string;
  status: number;
  response: string;
  /** When it was sent, ms (the hosts' clock). */
  at: number;
}

export interface HostAnswer {
  status: number;
  text: string;
  events: HostEvent[];
  receipt?: HostReceipt;
  output: string[];
  done: boolean;
  meta?: Uint8Array[];
  /** The first event's JSON as sent (v5: its `height_sync` section, the receipt's stamp). */
  first?: Record<string, unknown>;
}

const txKey = (tx: DevshardTx): string => toHex(sha256(toBinary(DevshardTxSchema, tx)));

export class ProtocolClient {
  readonly replica: Replica;
  readonly diffs: Diff[] = [];
  /** Root after each nonce, as our replica computed it. */
  readonly roots = new Map<bigint, Uint8Array>();
  /** Latest nonce each host (by index) acknowledged with a receipt. */
  readonly acked = new Map<number, bigint>();
  readonly pending = new Map<string, DevshardTx>();
  readonly captured: Captured[] = [];
  /** Every receipt whose state_hash differed from our root (must stay empty). */
  readonly mismatches: string[] = [];
  /** The route prefix this client speaks. */
  readonly route: string;
  /** The state-root tag this client hashes. */
  readonly tag: string;

  constructor(
    readonly net: TestNet,
    readonly key: Key = net.creator,
    o: { route?: string; tag?: string } = {},
  ) {
    this.route = o.route ?? net.route;
    this.tag = o.tag ?? (o.route !== undefined ? (versionOfRoute(o.route) ?? o.route.split('/').pop()!) : net.version);
    const n = net.escrow.slots.length;
    const config = applyChainBindParams(sessionConfigFromEscrow(n, net.escrow.session!), n, net.bind);
    const routeVersion = versionOfRoute(this.route) ?? this.route.split('/').pop()!;
    this.replica = Replica.create({
      escrowId: net.escrow.id,
      slots: net.escrow.slots.map((s) => s.host),
      amount: net.escrow.amount!,
      userAddress: net.escrow.creator,
      config,
      version: this.tag,
      rules: hostRules(routeVersion),
    });
  }

  now(): number {
    return Date.now() + this.net.clock.offsetMs;
  }

  get escrowId(): string {
    return this.net.escrow.id;
  }

  /** Host index of a slot. */
  hostOfSlot(slot: number): number {
    return this.net.hosts.findIndex((h) => h.address === this.net.escrow.slots[slot]!.host);
  }

  executorHost(nonce: bigint): number {
    return this.hostOfSlot(Number(nonce % BigInt(this.net.escrow.slots.length)));
  }

  /** The diffs host `i` still needs (above what it acknowledged). */
  catchUp(i: number): SignedDiff[] {
    const from = this.acked.get(i) ?? 0n;
    return this.diffs.filter((d) => d.nonce > from).map((d) => ({ nonce: d.nonce, txs: [...d.txs], userSig: d.userSig, postStateRoot: d.postStateRoot }));
  }

  /** Composes and signs the next diff from the pending host txs and `extra`. */
  next(extra: DevshardTx[]): Diff {
    const c = composeDiff(this.replica, { pending: [...this.pending.values()], extra });
    this.pending.clear();
    const d = signDiff(this.escrowId, c.nonce, c.applied, c.root, this.key.privateKey);
    this.diffs.push(d);
    this.roots.set(c.nonce, c.root);
    return d;
  }

  /** Signs and POSTs a body to host `i` (timestamp offset and signing key adjustable for refusals). */
  async post(i: number, route: string, body: string, o: { tsOffset?: number; key?: Key; headers?: Record<string, string> } = {}): Promise<{ status: number; text: string }> {
    const url = sessionUrl(this.net.hostUrl(i), this.escrowId, route, this.route);
    const ts = BigInt(Math.floor(this.now() / 1000) + (o.tsOffset ?? 0));
    const bytes = new TextEncoder().encode(body);
    const sig = signMessage(requestHeaderMessage(this.escrowId, bytes, ts), (o.key ?? this.key).privateKey);
    const headers = o.headers ?? { 'content-type': 'application/json', 'x-devshard-signature': Buffer.from(sig).toString('hex'), 'x-devshard-timestamp': String(ts) };
    const at = this.now();
    const res = await fetch(url, { method: 'POST', headers, body });
    const text = await res.text();
    this.captured.push({ url, headers, body, status: res.status, response: text, at });
    return { status: res.status, text };
  }

  /** Reads an SSE answer; records the receipt, checks its root, takes host txs. */
  absorb(i: number, status: number, text: string): HostAnswer {
    const a: HostAnswer = { status, text, events: [], output: [], done: false };
    if (status !== 200) return a;
    for (const block of text.split('\n\n')) {
      if (!block.startsWith('data: ')) continue;
      const ev = readHostEvent(block.slice(6));
      a.events.push(ev);
      if (ev.kind === 'receipt') {
        a.receipt = ev.receipt;
        a.first = JSON.parse(block.slice(6)) as Record<string, unknown>;
        this.acked.set(i, ev.receipt.nonce);
        const ours = this.roots.get(ev.receipt.nonce);
        if (!ours || !ev.receipt.stateHash || !bytesEqual(ours, ev.receipt.stateHash)) this.mismatches.push(`host ${i} nonce ${ev.receipt.nonce}`);
        if (ev.receipt.receipt) {
          // v5: the receipt signs the executor's stamp, which the ConfirmStart must carry unchanged.
          const r = a.first.devshard_receipt as { observed_height?: number; observed_block_hash?: string };
          const stamp = r.observed_block_hash ? { observedHeight: BigInt(r.observed_height ?? 0), observedBlockHash: new Uint8Array(Buffer.from(r.observed_block_hash, 'base64')) } : {};
          const tx = create(DevshardTxSchema, {
            tx: { case: 'confirmStart', value: create(MsgConfirmStartSchema, { inferenceId: ev.receipt.nonce, executorSig: ev.receipt.receipt, confirmedAt: ev.receipt.confirmedAt ?? 0n, ...stamp }) },
          });
          this.pending.set(txKey(tx), tx);
        }
      } else if (ev.kind === 'output') a.output.push(ev.data);
      else if (ev.kind === 'done') a.done = true;
      else if (ev.kind === 'meta') {
        a.meta = ev.mempool;
        for (const b of ev.mempool) {
          const tx = fromBinary(DevshardTxSchema, b);
          this.pending.set(txKey(tx), tx);
        }
      }
    }
    return a;
  }

  /** One inference: a Start in the next diff, sent with catch-up to its executor. */
  async infer(chat: Record<string, unknown>, o: { payload?: (p: InferencePayload) => InferencePayload; startedAt?: bigint } = {}): Promise<HostAnswer & { nonce: bigint; host: number }> {
    const prompt = new TextEncoder().encode(JSON.stringify(chat));
    const nonce = this.replica.latestNonce + 1n;
    const startedAt = o.startedAt ?? BigInt(Math.floor(this.now() / 1000));
    const maxTokens = BigInt((chat.max_tokens as number | undefined) ?? 256);
    const start = create(MsgStartInferenceSchema, { inferenceId: nonce, promptHash: canonicalPromptHash(prompt), model: String(chat.model), inputLength: BigInt(prompt.length), maxTokens, startedAt });
    this.next([create(DevshardTxSchema, { tx: { case: 'startInference', value: start } })]);
    const host = this.executorHost(nonce);
    let payload: InferencePayload = { prompt, model: String(chat.model), inputLength: BigInt(prompt.length), maxTokens, startedAt };
    if (o.payload) payload = o.payload(payload);
    const r = await this.post(host, 'chat/completions', inferenceRequestJson(this.catchUp(host), nonce, payload));
    return { ...this.absorb(host, r.status, r.text), nonce, host };
  }

  /**
   * Like infer, but reads the stream as it comes and gives up `waitMs` after the last byte (a stalled
   * or dead executor): what arrived is absorbed.
   */
  async inferPartial(chat: Record<string, unknown>, waitMs: number): Promise<HostAnswer & { nonce: bigint; host: number; aborted: boolean }> {
    const prompt = new TextEncoder().encode(JSON.stringify(chat));
    const nonce = this.replica.latestNonce + 1n;
    const startedAt = BigInt(Math.floor(this.now() / 1000));
    const maxTokens = BigInt((chat.max_tokens as number | undefined) ?? 256);
    const start = create(MsgStartInferenceSchema, { inferenceId: nonce, promptHash: canonicalPromptHash(prompt), model: String(chat.model), inputLength: BigInt(prompt.length), maxTokens, startedAt });
    this.next([create(DevshardTxSchema, { tx: { case: 'startInference', value: start } })]);
    const host = this.executorHost(nonce);
    const payload: InferencePayload = { prompt, model: String(chat.model), inputLength: BigInt(prompt.length), maxTokens, startedAt };
    const body = inferenceRequestJson(this.catchUp(host), nonce, payload);
    const ts = BigInt(Math.floor(this.now() / 1000));
    const sig = signMessage(requestHeaderMessage(this.escrowId, new TextEncoder().encode(body), ts), this.key.privateKey);
    const ac = new AbortController();
    const res = await fetch(sessionUrl(this.net.hostUrl(host), this.escrowId, 'chat/completions', this.route), {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-devshard-signature': Buffer.from(sig).toString('hex'), 'x-devshard-timestamp': String(ts) },
      body,
      signal: ac.signal,
    });
    let text = '';
    let aborted = false;
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const idle = new Promise<'idle'>((resolve) => (timer = setTimeout(() => resolve('idle'), waitMs)));
      const r = await Promise.race([reader.read().catch(() => ({ done: true, value: undefined })), idle]);
      clearTimeout(timer);
      if (r === 'idle') {
        aborted = true;
        ac.abort();
        break;
      }
      if (r.done) break;
      text += decoder.decode(r.value, { stream: true });
    }
    return { ...this.absorb(host, res.status, text), nonce, host, aborted };
  }

  /** Brings host `i` to our latest nonce (diffs only, no payload). */
  async sync(i: number): Promise<HostAnswer> {
    const r = await this.post(i, 'chat/completions', inferenceRequestJson(this.catchUp(i), this.replica.latestNonce));
    return this.absorb(i, r.status, r.text);
  }

  /** MsgFinalizeRound, then diffs until Settlement (FinalizeNonce + n), each sent to every host. */
  async finalize(): Promise<bigint> {
    this.next([create(DevshardTxSchema, { tx: { case: 'finalizeRound', value: create(MsgFinalizeRoundSchema, {}) } })]);
    const distinct = [...new Set(this.net.escrow.slots.map((_, s) => this.hostOfSlot(s)))];
    for (const i of distinct) await this.sync(i);
    const target = this.replica.finalizeNonce + BigInt(this.net.escrow.slots.length);
    while (this.replica.latestNonce < target) {
      this.next([]);
      for (const i of distinct) await this.sync(i);
    }
    return target;
  }

  async get(i: number, route: string): Promise<{ status: number; json: unknown; text: string }> {
    const res = await fetch(sessionUrl(this.net.hostUrl(i), this.escrowId, route, this.route));
    const text = await res.text();
    return { status: res.status, json: JSON.parse(text) as unknown, text };
  }
}

/**
 * Writes a client's requests in ../shared/tools/realnet's capture format (one file per request, as
 * its tap.mjs writes them), the settlement file and the session's facts, for verify-request.mjs /
 * verify-diffs.mjs / verify-finalize.mjs run by hand.
 */
export function writeWitnessCaptures(net: TestNet, client: ProtocolClient, dir: string, settlementFile: string): void {
  mkdirSync(join(dir, 'caps'), { recursive: true });
  client.captured.forEach((c, seq) => {
    const u = new URL(c.url);
    const hostIndex = Number(/^\/hosts\/(\d+)\//.exec(u.pathname)![1]);
    const record = {
      seq,
      received_at: c.at,
      method: 'POST',
      url: u.pathname.replace(/^\/hosts\/\d+/, ''),
      headers: c.headers,
      body_base64: Buffer.from(c.body).toString('base64'),
      target: net.hostUrl(hostIndex),
      host_address: net.hosts[hostIndex]!.address,
      response: { status: c.status },
    };
    writeFileSync(join(dir, 'caps', `${String(seq).padStart(4, '0')}-POST.json`), JSON.stringify(record));
  });
  writeFileSync(join(dir, 'settlement.json'), settlementFile);
  writeFileSync(join(dir, 'session.json'), JSON.stringify({ creator: net.creator.address, slots: net.escrow.slots.map((s) => s.host), amount: String(net.escrow.amount) }));
}
