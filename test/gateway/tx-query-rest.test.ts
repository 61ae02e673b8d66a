/**
 * DEVSHARD_TX_QUERY_REST: a real gateway looks its transactions up by hash at that chain REST
 * address (`/cosmos/tx/v1beta1/txs/{hash}`). A counting proxy in front of the devnet's REST shows
 * the lookups of an escrow creation going there, the 404s before inclusion included.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

describe('DEVSHARD_TX_QUERY_REST', () => {
  let gw: TestGateway;
  let proxy: Server;
  let target = '';
  const seen: { path: string; status: number }[] = [];

  beforeAll(async () => {
    proxy = createServer((req, res) => {
      void (async () => {
        const r = await fetch(target + req.url);
        seen.push({ path: req.url ?? '', status: r.status });
        res.writeHead(r.status, { 'content-type': r.headers.get('content-type') ?? 'application/json' });
        res.end(Buffer.from(await r.arrayBuffer()));
      })().catch(() => res.writeHead(502).end());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const { port } = proxy.address() as AddressInfo;
    gw = await startTestGateway({ env: { DEVSHARD_TX_QUERY_REST: `http://127.0.0.1:${port}/` } });
    // The devnet's address is known once it runs; nothing looks a tx up before a create.
    target = gw.devnet!.url.replace(/\/+$/, '');
  });
  afterAll(async () => {
    await disposeTestGateway(gw);
    await new Promise((resolve) => proxy.close(resolve));
  });

  it('an escrow creation waits for its tx there and reads the outcome from the REST answer', async () => {
    expect(seen).toEqual([]);
    const r = await gw.call('/v1/admin/escrows', { body: { amount: '10000000000', model_id: MODEL, private_key: gw.keys.privateKey, chain_id: 'shardgate-devnet', register: true } });
    expect(r.status, r.text).toBe(200);
    const lookups = seen.filter((s) => s.path === `/cosmos/tx/v1beta1/txs/${r.json.tx_hash}`);
    expect(lookups.length).toBeGreaterThan(0);
    expect(lookups.at(-1)!.status).toBe(200);
    // The escrow id and height came from the REST tx_response's events.
    expect(r.json.id).toMatch(/^\d+$/);
    expect(r.json.escrow_id).toBe(Number(r.json.id));
    expect(r.json.height).toBeGreaterThan(0);
    expect(r.json.registered).toBe(true);
  });
});
