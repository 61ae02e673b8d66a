/**
 * The minimal devshard protocol client of the protocol-path bench (issue 31 (b)): an OpenAI
 * `POST /v1/chat/completions` (non-streamed) in front of the hosts, doing only what the protocol
 * needs. Per request: the next nonce's diff (the pending host txs and a MsgStartInference) composed
 * on the escrow's replica and signed, the request header signed, the body sent to the executor
 * (slots[nonce % n]) with the diffs that host has not acknowledged, the SSE answer read whole and
 * the host's chat.completion forwarded as it came. No log, no receipt checks, no retries, no timeouts.
 *
 * It still takes ConfirmStart (from the receipt) and Finish (from devshard_meta.mempool) into later
 * diffs. Not for the roots: both sides apply the same signed diffs, so the hosts' roots follow ours
 * whatever the diffs hold. But a started inference that is never confirmed or finished keeps its
 * max cost reserved on the escrow's balance and becomes a timeout candidate (refusal_timeout, then
 * execution_timeout): a session that drops them runs its balance down and is not the session a
 * real client keeps. Taking them is also the work the gateway does, so the comparison is fair.
 */
import { create, fromBinary } from '@bufbuild/protobuf';
import Fastify from 'fastify';
import { Pool } from 'undici';
import type { ChainEscrow } from '../src/chain/port.js';
import { readHostEvent } from '../src/network/devshard/host-events.js';
import { inferenceRequestJson, sessionUrl, type SignedDiff } from '../src/network/devshard/request-body.js';
import { applyChainBindParams, canonicalPromptHash, composeDiff, requestHeaderMessage, sessionConfigFromEscrow, signDiff, signMessage, Replica, NEWEST_VERSION, versionSpec, type ChainBindParams } from '../src/protocol/index.js';

/** The version the gateway's escrows speak on the devnet (the newest we speak): its route and tag. */
const PROTOCOL = versionSpec(NEWEST_VERSION)!;
import { DevshardTxSchema, type DevshardTx } from '../src/protocol/gen/devshard/v1/diff_pb.js';
import { MsgConfirmStartSchema, MsgStartInferenceSchema } from '../src/protocol/gen/devshard/v1/tx_pb.js';

class MinimalSession {
  readonly replica: Replica;
  readonly diffs: SignedDiff[] = [];
  /** Per host URL: the latest nonce it acknowledged with a receipt. */
  readonly acked = new Map<string, bigint>();
  readonly pending = new Map<string, DevshardTx>();

  constructor(
    readonly escrow: ChainEscrow,
    bind: ChainBindParams | undefined,
    readonly key: Uint8Array,
  ) {
    const n = escrow.slots.length;
    const config = applyChainBindParams(sessionConfigFromEscrow(n, escrow.session ?? {}), n, bind ?? {});
    this.replica = Replica.create({ escrowId: escrow.id, slots: escrow.slots.map((s) => s.host), amount: escrow.amount, userAddress: escrow.creator, config, version: PROTOCOL.name });
  }

  /** The request for the next nonce: executor URL and signed body. */
  prepare(chat: { model: string; max_tokens?: number }, prompt: Uint8Array): { url: string; body: string; nonce: bigint } {
    const nonce = this.replica.latestNonce + 1n;
    const startedAt = BigInt(Math.floor(Date.now() / 1000));
    const maxTokens = BigInt(chat.max_tokens ?? 256);
    const start = create(MsgStartInferenceSchema, { inferenceId: nonce, promptHash: canonicalPromptHash(prompt), model: chat.model, inputLength: BigInt(prompt.length), maxTokens, startedAt });
    const c = composeDiff(this.replica, { pending: [...this.pending.values()], extra: [create(DevshardTxSchema, { tx: { case: 'startInference', value: start } })] });
    this.pending.clear();
    const d = signDiff(this.escrow.id, c.nonce, c.applied, c.root, this.key);
    this.diffs.push({ ...d, txs: [...d.txs] });
    const url = this.escrow.slots[Number(nonce % BigInt(this.escrow.slots.length))]!.url;
    const from = this.acked.get(url) ?? 0n;
    const catchUp: SignedDiff[] = this.diffs.filter((d) => d.nonce > from);
    const body = inferenceRequestJson(catchUp, nonce, { prompt, model: chat.model, inputLength: BigInt(prompt.length), maxTokens, startedAt });
    return { url, body, nonce };
  }

  /** Takes the receipt's nonce and ConfirmStart and the meta's mempool; returns the host's answer (a non-streamed request: one chat.completion). */
  absorb(url: string, nonce: bigint, sse: string): string {
    let answer = '';
    for (const block of sse.split('\n\n')) {
      if (!block.startsWith('data: ')) continue;
      const ev = readHostEvent(block.slice(6));
      if (ev.kind === 'receipt') {
        const r = ev.receipt;
        if (r.nonce > (this.acked.get(url) ?? 0n)) this.acked.set(url, r.nonce);
        // r.nonce is the host's latest (past ours when a later request got there first); the
        // executor's receipt is for our inference.
        if (r.receipt) {
          const confirm = create(MsgConfirmStartSchema, { inferenceId: nonce, executorSig: r.receipt, confirmedAt: r.confirmedAt ?? 0n });
          this.pending.set(`confirmStart${nonce}`, create(DevshardTxSchema, { tx: { case: 'confirmStart', value: confirm } }));
        }
      } else if (ev.kind === 'meta') {
        for (const b of ev.mempool) {
          const tx = fromBinary(DevshardTxSchema, b);
          this.pending.set(`${tx.tx.case}${(tx.tx.value as { inferenceId?: bigint } | undefined)?.inferenceId}`, tx);
        }
      } else if (ev.kind === 'output') answer += ev.data;
    }
    // The diffs every host acknowledged are no longer needed.
    const low = Math.min(...this.escrow.slots.map((s) => Number(this.acked.get(s.url) ?? 0n)));
    while (this.diffs.length > 0 && this.diffs[0]!.nonce <= BigInt(low)) this.diffs.shift();
    return answer;
  }
}

/** Serves the client on loopback; `escrows` are read from the chain (created by the caller). */
export async function startMinimalClient(opts: { escrows: ChainEscrow[]; bind?: ChainBindParams; privateKey: Uint8Array }) {
  const sessions = opts.escrows.map((e) => new MinimalSession(e, opts.bind, opts.privateKey));
  const pools = new Map<string, Pool>();
  const poolOf = (origin: string) => {
    let p = pools.get(origin);
    if (!p) pools.set(origin, (p = new Pool(origin, { connections: 128 })));
    return p;
  };
  let next = 0;
  const app = Fastify({ logger: false });
  app.post('/v1/chat/completions', async (request, reply) => {
    const chat = request.body as { model: string; max_tokens?: number };
    const s = sessions[next++ % sessions.length]!;
    const prompt = Buffer.from(JSON.stringify(chat));
    const { url, body, nonce } = s.prepare(chat, prompt);
    const ts = BigInt(Math.floor(Date.now() / 1000));
    const sig = signMessage(requestHeaderMessage(s.escrow.id, Buffer.from(body), ts), opts.privateKey);
    const target = new URL(sessionUrl(url, s.escrow.id, 'chat/completions', PROTOCOL.defaultRoute));
    const res = await poolOf(target.origin).request({
      path: target.pathname,
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-devshard-signature': Buffer.from(sig).toString('hex'), 'x-devshard-timestamp': String(ts) },
      body,
    });
    const text = await res.body.text();
    if (res.statusCode !== 200) {
      console.error(`minimal client: host ${res.statusCode} for nonce ${nonce} of escrow ${s.escrow.id}: ${text.slice(0, 200)}`);
      return reply.code(502).send({ error: { message: `host ${res.statusCode}: ${text}` } });
    }
    // The host's chat.completion, forwarded as it came.
    return reply.header('content-type', 'application/json').send(s.absorb(url, nonce, text));
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${addr.port}`,
    close: async () => {
      await app.close();
      for (const p of pools.values()) await p.close();
    },
  };
}
