/**
 * The simulated hosts' sessions across restarts (DEVNET_STATE): each applied diff is written through
 * to the state file by host address, version and escrow; a new HostSessions over the same file
 * replays them into a fresh Replica with every check (a damaged record stops the replay there), and
 * another address or another version inherits nothing. A file written before versions were kept is
 * read as version "v2". The restart through a gateway is test/gateway/devnet-host-sessions-restart.e2e.test.ts.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openHostSessionStore, type SqliteHostSessionStore } from '../../src/devnet/chain/host-sessions-store.js';
import type { DevnetChainView } from '../../src/devnet/hosts/chain-view.js';
import { HostSessions } from '../../src/devnet/hosts/protocol/session.js';
import { decodeTimeoutDiffs } from '../../src/devnet/hosts/protocol/wire.js';
import { inferenceRequestJson } from '../../src/network/devshard/request-body.js';
import { BIND, MODEL, ProtocolClient, startTestNet, type TestNet } from './host-protocol-client.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('HostSessions with a store (DEVNET_STATE)', () => {
  let net: TestNet;
  let dir: string;
  let store: SqliteHostSessionStore;
  let chain: DevnetChainView;

  beforeAll(async () => {
    net = await startTestNet();
    const client = new ProtocolClient(net);
    for (let i = 0; i < 4; i++) expect((await client.infer({ model: MODEL, messages: [{ role: 'user', content: `q${i}` }], max_tokens: 8 })).status).toBe(200);
    dir = mkdtempSync(join(tmpdir(), 'host-sessions-'));
    store = openHostSessionStore(join(dir, 'devnet.sqlite'));
    chain = { escrow: (id) => (id === net.escrow.id ? net.escrow : undefined), tokenPrice: () => 3n, sessionBindParams: () => BIND };
  });
  afterAll(async () => {
    store?.close();
    await net?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const original = (i: number) => net.sim.protocol.peek(i, net.escrow.id)!;
  const storedJson = (i: number) => [...original(i).applied.values()].map((r) => r.diff.json);

  it('writes every applied diff through, and a new HostSessions over the file resumes at the same nonce and root', () => {
    const live = new HostSessions(chain, store);
    const s = live.get(net.hosts[0]!, net.escrow.id, net.version);
    expect(s.latestNonce).toBe(0n);
    s.applyDiffs(decodeTimeoutDiffs(storedJson(0)));
    expect(store.load(net.hosts[0]!.address, net.escrow.id, net.version)).toEqual(storedJson(0));
    // kept under its version only
    expect(store.load(net.hosts[0]!.address, net.escrow.id, 'v3')).toEqual([]);
    expect(store.load(net.hosts[0]!.address, net.escrow.id)).toEqual([]);

    const reopened = openHostSessionStore(join(dir, 'devnet.sqlite'));
    try {
      const r = new HostSessions(chain, reopened).get(net.hosts[0]!, net.escrow.id, net.version);
      expect(r.latestNonce).toBe(original(0).latestNonce);
      expect(r.latestNonce).toBeGreaterThan(1n);
      expect(hex(r.replica.stateRoot())).toBe(hex(original(0).replica.stateRoot()));
      expect([...r.applied.keys()]).toEqual([...original(0).applied.keys()]);
      // another address has no diffs of its own there: it starts empty
      expect(new HostSessions(chain, reopened).get(net.hosts[1]!, net.escrow.id, net.version).latestNonce).toBe(0n);
      // nor has another version's devshardd (its own storage)
      expect(new HostSessions(chain, reopened).get(net.hosts[0]!, net.escrow.id, 'v3').latestNonce).toBe(0n);
    } finally {
      reopened.close();
    }
  });

  it("reads a file written before versions were kept as v2 (the legacy route's sessions)", () => {
    const v2 = new ProtocolClient(net, net.creator, { route: '/devshard/v2' });
    v2.next([]);
    v2.next([]);
    const diffs = (JSON.parse(inferenceRequestJson(v2.diffs, 2n)) as { diffs: ReturnType<typeof storedJson> }).diffs;
    const path = join(dir, 'old.sqlite');
    const old = new Database(path);
    old.exec('CREATE TABLE devnet_host_diffs (host TEXT NOT NULL, escrow TEXT NOT NULL, nonce INTEGER NOT NULL, diff TEXT NOT NULL, PRIMARY KEY (host, escrow, nonce))');
    for (const d of diffs) old.prepare('INSERT INTO devnet_host_diffs VALUES (?, ?, ?, ?)').run(net.hosts[0]!.address, net.escrow.id, d.nonce, JSON.stringify(d));
    old.close();
    const migrated = openHostSessionStore(path);
    try {
      expect(migrated.load(net.hosts[0]!.address, net.escrow.id, 'v2')).toEqual(diffs);
      expect(migrated.load(net.hosts[0]!.address, net.escrow.id)).toEqual(diffs);
      const s = new HostSessions(chain, migrated).get(net.hosts[0]!, net.escrow.id, 'v2');
      expect(s.latestNonce).toBe(2n);
      expect(hex(s.replica.stateRoot())).toBe(hex(v2.replica.stateRoot()));
      expect(new HostSessions(chain, migrated).get(net.hosts[0]!, net.escrow.id, 'v3').latestNonce).toBe(0n);
    } finally {
      migrated.close();
    }
    // opened again: nothing left to move, the rows stay
    const again = openHostSessionStore(path);
    expect(again.load(net.hosts[0]!.address, net.escrow.id, 'v2')).toHaveLength(2);
    again.close();
  });

  it('replays with every check: a record whose user signature was altered stops the replay before it', () => {
    const diffs = storedJson(2);
    expect(diffs.length).toBeGreaterThanOrEqual(2);
    const sig = Buffer.from(diffs[1]!.user_sig, 'base64');
    sig[5]! ^= 0x01;
    const damaged = [diffs[0]!, { ...diffs[1]!, user_sig: sig.toString('base64') }, ...diffs.slice(2)];
    const memory = { load: () => damaged, save: () => undefined };
    const s = new HostSessions(chain, memory).get(net.hosts[2]!, net.escrow.id, net.version);
    expect([...s.applied.keys()]).toEqual([BigInt(diffs[0]!.nonce)]);
  });
});
