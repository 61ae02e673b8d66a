/**
 * Issue 41 item 7: the log never contradicts what the client saw. A `shardgate serve` child is
 * SIGKILLed the moment a client has the last byte of its answer (a stream's `data: [DONE]`, a
 * whole answer's closing brace); after a restart the request is in the log as finished, billed,
 * never as "gateway restarted while the request was in flight". (Before, the completion was
 * committed with the group commit after the last byte: a kill in between lost it.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateKeys } from '../../src/config/index.js';
import { startDevnet, type Devnet } from '../../src/devnet/chain/index.js';
import { MODEL } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { crashEnv, freePort, readLogAt, ServeProcess } from './serve-process.js';

describe('kill -9 right after the last byte of an answer', () => {
  const keys = generateKeys();
  const work = mkdtempSync(join(tmpdir(), 'shardgate-last-byte-'));
  const storage = join(work, 'storage');
  const serve = new ServeProcess(work);
  let devnet: Devnet;
  let base = '';
  let env: Record<string, string>;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0, creators: [keys.privateKey], env: { DEVNET_BLOCK_TIME_MS: '50', DEVNET_TOKEN_DELAY_MS: '2' } });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    env = { ...crashEnv({ port, devnetPort: 0, storage, keys }), NODE_RPC: devnet.rpcUrl, NODE_CHAIN_API: devnet.url, NODE_BASE: devnet.url };
  }, 30_000);
  afterAll(async () => {
    await serve.kill();
    await devnet?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const headers = { authorization: `Bearer ${keys.adminApiKey}`, 'content-type': 'application/json' };
  const start = () => serve.start(env, `${base}/v1/status`, 20_000, ['serve']);

  /** Sends a chat and SIGKILLs the gateway as soon as the answer's last byte is in; answers its request id. */
  async function chatThenKill(stream: boolean, requestId: string): Promise<void> {
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...headers, 'x-request-id': requestId },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `last byte ${requestId}` }], max_tokens: 40, stream }),
    });
    expect(r.status).toBe(200);
    const reader = r.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      const whole = stream ? text.includes('data: [DONE]') : text.trimEnd().endsWith('}');
      if (whole) {
        // The client has its whole answer: kill before anything else can happen.
        await serve.kill();
        break;
      }
    }
    if (!stream) expect(JSON.parse(text).object).toBe('chat.completion');
  }

  it('finds each whole answer in the log as finished after the restart', { timeout: 120_000 }, async () => {
    await start();
    const created = await fetch(`${base}/v1/admin/escrows`, { method: 'POST', headers, body: JSON.stringify({ amount: '10000000000', model_id: MODEL, private_key: keys.privateKey, register: true }) });
    expect(created.status).toBe(200);
    const ids: string[] = [];
    for (let round = 0; round < 4; round++) {
      const id = `last-byte-${round}`;
      ids.push(id);
      await chatThenKill(round % 2 === 0, id);
      await start();
    }
    const records = requestRecords(readLogAt(storage));
    for (const id of ids) {
      const ends = records.filter((r) => (r.type === 'InferenceFinished' || r.type === 'InferenceFailed') && (r.data as { requestId?: string }).requestId === id);
      expect(ends.map((r) => r.type), `request ${id}`).toEqual(['InferenceFinished']);
      expect(BigInt((ends[0]!.data as { cost: string }).cost), `request ${id} billed`).toBeGreaterThan(0n);
    }
  });
});
