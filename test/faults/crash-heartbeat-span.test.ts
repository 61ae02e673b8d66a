/**
 * Issue 40: a whole v5 session through kill -9 in the middle of idle heartbeat spans. The devnet
 * (chain and simulated hosts) runs in this test's process and outlives the gateway; a `shardgate
 * serve` child with a v5 escrow serves chats streamed and not and tool calls, goes quiet, and is
 * SIGKILLed the moment the first host receives a heartbeat diff (the span's acks not yet flushed),
 * three times. After the last restart an executor turns a streamed answer into an error, which
 * the gateway resolves by error-miss (the Finish, then MsgErrorMiss, in one diff). Every diff any
 * host receives is witnessed. Then: no nonce ever reached a host with two different diffs, no host
 * refused a diff (a gap is refused), the next span after each restart starts clean (a forced turn
 * opened again), and the escrow finalizes and settles under the tag "v5".
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import { MODEL } from '../helpers/gateway.js';
import { crashEnv, freePort, ServeProcess } from './serve-process.js';

describe('a whole v5 session through kill -9 mid heartbeat span', () => {
  const keys = generateKeys();
  const work = mkdtempSync(join(tmpdir(), 'shardgate-crash-span-'));
  const storage = join(work, 'storage');
  const serve = new ServeProcess(work);
  let devnet: Devnet;
  let base = '';
  let env: Record<string, string>;
  const diffs = new Map<bigint, string>();
  const reused: string[] = [];
  const refused: string[] = [];
  /** Nonces of diffs opening a forced turn (a span's first), in arrival order. */
  const spanStarts: bigint[] = [];
  /** Nonces of diffs carrying a MsgErrorMiss, and what came before it in the diff. */
  const errorMisses: { nonce: bigint; kinds: string[] }[] = [];
  let onHeartbeat: (() => void) | undefined;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, creators: [keys.privateKey], env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '2' } });
    devnet.simulatedHosts.protocol.observer = (host, _escrowId, diff, outcome, why) => {
      const digest = `${diff.json.post_state_root}|${diff.json.user_sig}`;
      const first = diffs.get(diff.nonce);
      if (first === undefined) diffs.set(diff.nonce, digest);
      else if (first !== digest) reused.push(`nonce ${diff.nonce} at host ${host.index}`);
      if (outcome === 'refused') refused.push(`host ${host.index}, nonce ${diff.nonce}: ${why}`);
      if (diff.txs.some((t) => t.tx.case === 'forceHeightSyncTurn') && !spanStarts.includes(diff.nonce)) spanStarts.push(diff.nonce);
      if (diff.txs.some((t) => t.tx.case === 'errorMiss') && !errorMisses.some((e) => e.nonce === diff.nonce)) errorMisses.push({ nonce: diff.nonce, kinds: diff.txs.map((t) => String(t.tx.case)) });
      if (diff.txs.some((t) => t.tx.case === 'heartbeat')) onHeartbeat?.();
    };
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = {
      ...crashEnv({ port, devnetPort: 0, storage, keys }),
      NODE_RPC: devnet.rpcUrl,
      NODE_CHAIN_API: devnet.url,
      NODE_BASE: devnet.url,
      // A span as soon as the session has been quiet for 50 ms (ticks every second).
      GATEWAY_HEARTBEAT_IDLE_MS: '50',
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
  const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];
  /** Chats in turn: plain, streamed, a tool call, a streamed tool call. */
  async function chat(i: number): Promise<{ status: number; text: string }> {
    const body: Record<string, unknown> = { model: MODEL, messages: [{ role: 'user', content: `span question ${i}` }], max_tokens: 80 };
    if (i % 4 >= 2) Object.assign(body, { tools, tool_choice: 'required' });
    if (i % 2 === 0) {
      const r = await api('/v1/chat/completions', body);
      if (r.status === 200 && i % 4 >= 2) expect(r.json.choices[0].finish_reason).toBe('tool_calls');
      return r;
    }
    const r = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ ...body, stream: true }), signal: AbortSignal.timeout(30_000) });
    const text = await r.text();
    if (r.status === 200) expect(text).toContain('data: [DONE]');
    return { status: r.status, text };
  }
  const start = () => serve.start(env, `${base}/v1/status`, 20_000, ['serve']);
  /** Resolves at the next heartbeat diff a host receives (bounded). */
  const nextHeartbeat = () =>
    new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no heartbeat span within 20 s; the gateway said: ${serve.stderr.slice(-3000)}`)), 20_000);
      onHeartbeat = () => {
        onHeartbeat = undefined;
        clearTimeout(t);
        resolve();
      };
    });

  it('chats, tools, spans killed three times, an error answer resolved by error-miss; no nonce reused or skipped on any host; finalize and settle', { timeout: 150_000 }, async () => {
    await start();
    const created = await api('/v1/admin/escrows', { amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, register: true, protocol_version: 'v5' });
    expect(created.status, created.text).toBe(200);
    const escrowId = String(created.json.id);

    let i = 0;
    for (let round = 0; round < 3; round++) {
      // Chats give the session its floor (and after a restart, reopen it); then it goes quiet.
      for (let k = 0; k < 3; k++) expect((await chat(i++)).status).toBe(200);
      const spansBefore = spanStarts.length;
      const heartbeat = nextHeartbeat();
      await heartbeat;
      // Killed with the span's other diffs (and its acks' flush) not yet sent.
      await serve.kill();
      expect(spanStarts.length).toBeGreaterThan(spansBefore);
      await start();
      expect(reused).toEqual([]);
      expect(refused).toEqual([]);
    }
    // After the last restart: chat goes on, and a new span opens a forced turn again.
    for (let k = 0; k < 3; k++) expect((await chat(i++)).status).toBe(200);
    // An executor answers a streamed chat with an error (its Finish still signed): the client gets
    // the error, and the gateway claims the miss from the other hosts' votes.
    Object.assign(devnet.simulatedHosts.faults, { errorAnswerAfterChunks: 3 });
    const failed = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'this one fails' }], max_tokens: 80, stream: true }), signal: AbortSignal.timeout(30_000) });
    const failedText = await failed.text();
    for (const k of Object.keys(devnet.simulatedHosts.faults)) delete (devnet.simulatedHosts.faults as Record<string, unknown>)[k];
    expect(failedText).toContain('"error"');
    const missNonce = BigInt(failed.headers.get('x-devshard-nonce')!);
    // Resolved in the background (the next diffs come from chats or idle spans): Finish, then MsgErrorMiss.
    for (let w = 0; w < 600 && errorMisses.length === 0; w++) {
      if (w % 50 === 49) expect((await chat(i++)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(errorMisses.length, 'an error-miss diff').toBe(1);
    const kinds = errorMisses[0]!.kinds;
    expect(kinds.indexOf('finishInference')).toBeGreaterThanOrEqual(0);
    expect(kinds.indexOf('finishInference')).toBeLessThan(kinds.indexOf('errorMiss'));
    expect(errorMisses[0]!.nonce).toBeGreaterThan(missNonce);
    const spansBefore = spanStarts.length;
    await nextHeartbeat();
    for (let w = 0; w < 200 && spanStarts.length === spansBefore; w++) await new Promise((r) => setTimeout(r, 50));
    expect(spanStarts.length, 'a new span (forced turn) within 10 s of the heartbeat').toBeGreaterThan(spansBefore);

    const settled = await api(`/v1/admin/devshards/${escrowId}/settle`, {});
    expect(settled.status, settled.text).toBe(200);
    const onChain = (await fetch(`${devnet.url}/productscience/inference/inference/devshard_escrow/${escrowId}`).then((x) => x.json())) as { escrow: { settled: boolean } };
    expect(onChain.escrow.settled).toBe(true);
    expect(reused).toEqual([]);
    expect(refused).toEqual([]);
    // Every nonce from 1 to the last reached the hosts.
    const nonces = [...diffs.keys()].sort((a, b) => (a < b ? -1 : 1));
    expect(nonces).toEqual(nonces.map((_, k) => BigInt(k + 1)));
  });
});
