/**
 * A 400-nonce session composed the way the gateway will compose it (compose.ts: pending host txs,
 * best effort, the Start last; signed diffs), with starts, confirms (one slot through a warm key),
 * finishes, a refused and an execution timeout with votes, validations (one invalidated, one
 * validated by votes), auto-seals with small seal settings, a finalize and the drain at Settlement
 * (nonce 400). Used by long-session.test.ts, which can also write it out in the realnet capture
 * format (the independent witness).
 */
import { diffJson, composeDiff, signDiff } from '../../src/protocol/compose.js';
import { canonicalPromptHash } from '../../src/protocol/canonical-json.js';
import type { DevshardTx } from '../../src/protocol/gen/devshard/v1/diff_pb.js';
import { requestHeaderMessage } from '../../src/protocol/preimages.js';
import type { RecordedDiff } from '../../src/protocol/replay.js';
import { buildSettlement, settlementFileJson, settlementSignedBytes } from '../../src/protocol/settlement.js';
import { signMessage } from '../../src/protocol/signatures.js';
import { toHex, utf8 } from '../../src/protocol/bytes.js';
import { Kit, keyOf, TimeoutReason } from './session-kit.js';

export const LONG = {
  escrowId: '4242',
  slotsPerHost: [1, 1, 2, 1], // host 2 holds slots 2 and 3: weight 2
  amount: 3_000_000n,
  config: { tokenPrice: 1n, createDevshardFee: 10_000n, feePerNonce: 100n, voteThreshold: 2, inferenceSealGraceNonces: 10, inferenceSealGraceSeconds: 30, autoSealEveryNNonces: 25 },
  finalizeAt: 395n,
  lastStart: 390n,
  t0: 1_760_000_000n,
  /** The warm key slot 4 confirms with (authorised for host 3's cold address). */
  warm: keyOf('warm-slot-4'),
  refusedId: 50n,
  executionTimeoutId: 100n,
  invalidatedId: 120n,
  validatedId: 160n,
  checkedValidId: 140n,
} as const;

export interface Capture {
  name: string;
  json: object;
}

export interface LongSession {
  kit: Kit;
  diffs: RecordedDiff[];
  captures: Capture[];
  settlementJson: string;
  slots: string[];
  /** Nonces at which something was auto-sealed (before the drain). */
  sealNonces: bigint[];
}

const promptOf = (id: bigint): Uint8Array => utf8(JSON.stringify({ model: 'Qwen/Qwen3-235B', messages: [{ role: 'user', content: `question ${id}` }], max_tokens: 100 }));

export function buildLongSession(): LongSession {
  const L = LONG;
  const kit = new Kit({
    slotsPerHost: [...L.slotsPerHost],
    amount: L.amount,
    escrowId: L.escrowId,
    config: L.config,
    warmKeys: (warm, cold) => warm === L.warm.address && cold === keyOf('host-3').address,
  });
  const pendingAt = new Map<bigint, DevshardTx[]>();
  const later = (nonce: bigint, tx: DevshardTx) => pendingAt.set(nonce, [...(pendingAt.get(nonce) ?? []), tx]);
  const diffs: RecordedDiff[] = [];
  const captures: Capture[] = [];
  const sealNonces: bigint[] = [];
  const startedAt = (id: bigint) => L.t0 + 2n * id;
  const confirmedAt = (id: bigint) => L.t0 + 2n * id + 1n;
  const slotKey = (slot: number) => (slot === 4 ? L.warm : kit.slotKeys[slot]!);
  // Each request carries every diff since its host last heard from us (catch-up), as devshard/user does.
  const lastSent = new Map<string, bigint>();

  for (let nonce = 1n; nonce <= 400n; nonce++) {
    // Host txs known by now (from mempools): built just in time, signed by their hosts.
    const pending = pendingAt.get(nonce) ?? [];
    pendingAt.delete(nonce);
    const built = pending.map((tx) => tx);
    const extra: DevshardTx[] = [];
    let prompt: Uint8Array | undefined;
    if (nonce <= L.lastStart) {
      prompt = promptOf(nonce);
      extra.push(kit.start(nonce, { inputLength: BigInt(prompt.length), maxTokens: 100n, startedAt: startedAt(nonce), model: 'Qwen/Qwen3-235B', prompt: '' }));
      // Kit.start hashed the empty prompt; use the canonical prompt hash of the body, as devshardctl does.
      const start = extra[0]!.tx.value as { promptHash: Uint8Array };
      start.promptHash = canonicalPromptHash(prompt);
      kit.setPromptHash(nonce, start.promptHash);
    }
    if (nonce === L.finalizeAt) extra.push(kit.finalize());
    const c = composeDiff(kit.replica, { pending: built, extra, warmKeys: kit.warmKeys });
    if (c.skipped.length) throw new Error(`nonce ${nonce}: skipped ${c.skipped.map((s) => s.error.message).join('; ')}`);
    if (c.sealed.length && kit.replica.phase === 0) sealNonces.push(nonce);
    const d = signDiff(kit.escrowId, nonce, c.applied, c.root, kit.user.priv);
    diffs.push({ ...d, warmKeyBindings: c.warmKeyBindings });

    // The hosts' answers become pending txs of later nonces.
    if (nonce <= L.lastStart) {
      const id = nonce;
      const slot = kit.executorSlot(id);
      if (id === L.refusedId) later(id + 12n, kit.timeout(id, TimeoutReason.REFUSED, [0, 2])); // weights 1 + 2 > 2
      else {
        later(id + 1n, kit.confirm(id, confirmedAt(id), slotKey(slot)));
        if (id === L.executionTimeoutId) later(id + 15n, kit.timeout(id, TimeoutReason.EXECUTION, [1, 3, 4]));
        else later(id + 2n, kit.finish(id, { inputTokens: BigInt(prompt!.length), outputTokens: 20n + (id % 7n) * 13n, signer: kit.slotKeys[slot]! }));
      }
      if (id === L.invalidatedId) {
        later(id + 3n, kit.validation(id, 1, false));
        later(id + 4n, kit.vote(id, 2, false)); // address of slots 2 and 3: weight 2; 1 + 2 > 2
      }
      if (id === L.checkedValidId) later(id + 3n, kit.validation(id, 1, true));
      if (id === L.validatedId) {
        later(id + 3n, kit.validation(id, 2, false)); // weight 2, not above 2: Challenged
        later(id + 4n, kit.vote(id, 0, true)); // the executor's own vote counts
        later(id + 4n, kit.vote(id, 4, true));
        later(id + 4n, kit.vote(id, 1, true)); // 3 > 2: Validated
        later(id + 5n, kit.vote(id, 3, true)); // resolved already: a no-op
      }
    }

    // The request as devshardctl sends it, with its header signature.
    const ts = prompt ? startedAt(nonce) : L.t0 + 2n * nonce;
    const executor = kit.slotKeys[kit.executorSlot(nonce)]!;
    const since = lastSent.get(executor.address) ?? 0n;
    lastSent.set(executor.address, nonce);
    const body = utf8(
      JSON.stringify({
        diffs: diffs.filter((x) => x.nonce > since).map(diffJson),
        nonce: Number(nonce),
        ...(prompt ? { payload: { prompt: Buffer.from(prompt).toString('base64'), model: 'Qwen/Qwen3-235B', input_length: prompt.length, max_tokens: 100, started_at: Number(startedAt(nonce)) } } : {}),
      }),
    );
    captures.push({
      name: `${String(nonce).padStart(4, '0')}-POST-chat-completions.json`,
      json: {
        seq: Number(nonce),
        received_at: Number(ts) * 1000,
        method: 'POST',
        url: `/v1/devshard/sessions/${kit.escrowId}/chat/completions`,
        target: `http://host-${kit.hosts.indexOf(executor)}.invalid`,
        host_address: executor.address,
        headers: {
          'content-type': 'application/json',
          'x-devshard-signature': toHex(signMessage(requestHeaderMessage(kit.escrowId, body, ts), kit.user.priv)),
          'x-devshard-timestamp': String(ts),
        },
        body_base64: Buffer.from(body).toString('base64'),
      },
    });
  }

  const s = buildSettlement(kit.replica);
  const signatures = kit.slotKeys.map((key, slotId) => ({ slotId, signature: signMessage(settlementSignedBytes(s), key.priv) }));
  return { kit, diffs, captures, settlementJson: settlementFileJson(s, signatures), slots: kit.slotKeys.map((k) => k.address), sealNonces };
}
