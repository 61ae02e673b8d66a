/**
 * GATEWAY_RECORD_BEFORE_LAST_BYTE (issue 41 item 7): by default an answer's last byte waits for its
 * outcome's commit; set to false, the answer is whole while the commit is still pending (it lands
 * just after). Commits are held by the test (a gate on the store's append), not timed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/events/envelope.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';
import { requestRecords } from '../helpers/request-records.js';
import { nextRecord } from '../helpers/waits.js';

let gw: TestGateway | undefined;
afterEach(() => disposeTestGateway(gw));

/**
 * Holds the append that carries the request's end (its outcome) until `release`; `ending` resolves when
 * one arrives. Other appends go through: the session's diffs are durable before a request leaves.
 */
function holdCommits(g: TestGateway, requestId: string): { ending: Promise<void>; release: () => void } {
  const store = g.store;
  const append = store.append.bind(store);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let ended!: () => void;
  const ending = new Promise<void>((r) => (ended = r));
  store.append = async (streamId: string, events: NewEvent[], options) => {
    // Only this request's end: another request's (the warm-up's, on a slow machine still in its
    // group-commit window) must land, or this request's own records would queue behind it.
    if (events.some((e) => JSON.stringify(e.data).includes('"InferenceFinished"') && JSON.stringify(e.data).includes(`"requestId":"${requestId}"`))) {
      ended();
      await gate;
    }
    return append(streamId, events, options);
  };
  return { ending, release };
}

/** Resolves when the log holds the end of request `requestId` (a wait on the log, not on time). */
function finishedInLog(g: TestGateway, requestId: string): Promise<unknown> {
  return nextRecord(g.store, (r) => requestRecords([r]).some((x) => x.type === 'InferenceFinished' && (x.data as { requestId: string }).requestId === requestId), g.store.lastPosition());
}

async function chat(g: TestGateway, requestId: string): Promise<{ text: string; whole: () => boolean; done: Promise<void> }> {
  const r = await fetch(`${g.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${g.keys.adminApiKey}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, stream: true }),
  });
  expect(r.status).toBe(200);
  const out = { text: '', whole: () => out.text.includes('data: [DONE]'), done: Promise.resolve() };
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  out.done = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      out.text += decoder.decode(value, { stream: true });
    }
  })();
  return out;
}

describe('an answer and the commit of its outcome', () => {
  it('by default, the last byte waits for the commit: the client never has a whole answer the log lacks', async () => {
    ({ gw } = await startGatewayWithEscrow());
    const warm = finishedInLog(gw, 'warm');
    await (await chat(gw, 'warm')).done; // the nonce block is reserved (durable before use) before the hold
    await warm;
    const landed = finishedInLog(gw, 'held');
    const hold = holdCommits(gw, 'held');
    const answer = await chat(gw, 'held');
    await hold.ending;
    // The commit is held by the gate, so the last byte cannot have left; let pending I/O run first.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(answer.whole()).toBe(false);
    hold.release();
    await answer.done;
    expect(answer.whole()).toBe(true);
    await landed;
  });

  it('with GATEWAY_RECORD_BEFORE_LAST_BYTE=false, the answer is whole while its commit is still held, and is in the log once it lands', async () => {
    ({ gw } = await startGatewayWithEscrow({ env: { GATEWAY_RECORD_BEFORE_LAST_BYTE: 'false' } }));
    const warm = finishedInLog(gw, 'warm');
    await (await chat(gw, 'warm')).done;
    await warm; // its outcome lands after its answer here: in the log before the hold (seen timing out under load)
    const landed = finishedInLog(gw, 'after');
    const hold = holdCommits(gw, 'after');
    const answer = await chat(gw, 'after');
    await answer.done; // completes with the gate still closed
    expect(answer.whole()).toBe(true);
    hold.release();
    await landed; // the outcome lands once the test lets its commit go
  });
});
