/**
 * One chat call over the session (ProtocolTransport.chat): the escrow's session composes and signs
 * the nonce's diff, the request goes to the executor slots[nonce % n] with its header signature, and
 * the SSE answer is read: the receipt first (checked against our root), then the model's output for
 * the client (client-output.ts) while the meta mempool feeds later diffs.
 */
import type { Dispatcher } from 'undici';
import { HostError, NotRecorded, type ChatCall, type ChatChunk, type ChatCompletion, type ChatResult, type Usage } from '../../port.js';
import { countCompletionTokens, countPromptTokens } from '../../tokens.js';
import { chunksForClient, clientAsk, completionForClient } from '../client-output.js';
import { HostEventError, readHostEvent } from '../host-events.js';
import { sessionUrl } from '../request-body.js';
import { rulesOf } from '../../../protocol/index.js';
import { applyTokenFloor, cutCompletion, StreamCut } from '../token-floor.js';
import { AnswerLines } from '../error-miss.js';
import type { TransportContext } from './context.js';
import type { SessionFor } from './session-opening.js';
import type { NonceTurns } from './nonce-turns.js';
import type { ErrorMissSweep } from './error-miss-sweep.js';
import { CATCH_UP_CHUNK, catchUpInChunks, receiptOf } from './catch-up.js';
import { messageOf, refused } from './host-requests.js';
import { EventPump, Stalled } from './event-pump.js';
import { drain } from './drain.js';

const MAX_ERROR_BODY = 64 * 1024;

function isUsage(u: unknown): u is Usage {
  const x = u as Usage | null | undefined;
  return !!x && Number.isInteger(x.prompt_tokens) && Number.isInteger(x.completion_tokens) && Number.isInteger(x.total_tokens);
}

/** The transport's `chat`, over its sessions, nonce turns and error-miss claims. */
export function chatCaller(ctx: TransportContext, sessionFor: SessionFor, turns: NonceTurns, errorMisses: ErrorMissSweep): (call: ChatCall) => Promise<ChatResult> {
  const { now, stallTimeoutMs, timeoutMs, drainMs, agent } = ctx;
  /** Chunked catch-ups under way, by escrow and host (one at a time per host). */
  const catchingUp = new Map<string, Promise<void>>();
  return async function chat(call: ChatCall): Promise<ChatResult> {
    const s = await sessionFor(call);
    const nonce = BigInt(call.nonce);
    // A long catch-up (after a restart every recorded diff is sent once) goes in chunks first, so
    // this request carries at most CATCH_UP_CHUNK of them; before taking the nonce's turn, so the
    // calls after it do not wait on it.
    const executor = s.executorUrl(nonce);
    if (s.catchUpCount(executor) > CATCH_UP_CHUNK) {
      const key = `${call.escrowId} ${executor}`;
      let p = catchingUp.get(key);
      if (!p) {
        p = catchUpInChunks(ctx, s, executor).finally(() => catchingUp.delete(key));
        catchingUp.set(key, p);
      }
      await p;
    }
    await turns.turn(call.escrowId, s, nonce);
    // A v5 host refuses a budget below 64: raise it as devshardctl does, cut the answer at the client's (token-floor.ts).
    const floored = rulesOf(s.protocol) === 'v5' ? applyTokenFloor(call.body) : undefined;
    const hostBody = floored?.body ?? call.body;
    const prompt = Buffer.from(JSON.stringify(hostBody), 'utf8');
    const maxTokens = typeof hostBody.max_tokens === 'number' ? BigInt(hostBody.max_tokens) : 0n;
    const cutAt = floored?.clientLimit;
    // The gateway calls a host that moved at its participant's new inference_url (gateway/chat/host-urls.ts):
    // the session follows it, for this call and every later one to that host (and its finalize).
    if (call.hostUrl && call.hostUrl !== s.executorUrl(nonce)) s.moveHost(s.executorHost(nonce), call.hostUrl);
    let prepared;
    try {
      prepared = s.prepare(nonce, { prompt, model: String(call.body.model), maxTokens, startedAt: BigInt(Math.floor(now() / 1000)) });
    } catch (err) {
      throw new HostError('rejected', `devshard session of escrow ${call.escrowId} refused nonce ${nonce}: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      turns.wake(call.escrowId, s);
    }
    const hostUrl = prepared.hostUrl;
    const label = `host ${hostUrl}`;
    // The diffs are durable (recorded) before the first request carrying them leaves.
    if (prepared.recorded.length > 0) {
      try {
        await Promise.all(prepared.recorded);
      } catch (err) {
        throw new NotRecorded(`the diffs of nonce ${nonce} could not be recorded; not sent: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    const url = new URL(sessionUrl(hostUrl, call.escrowId, 'chat/completions', s.protocol.route));
    const ts = BigInt(Math.floor(now() / 1000));
    const sig = call.signer.signProtocol!(s.headerMessage(prepared.body, ts));
    const stream = call.body.stream === true;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-devshard-signature': Buffer.from(sig).toString('hex'),
      'x-devshard-timestamp': String(ts),
    };
    const at = now();
    const capture = ctx.onExchange;
    const exchanged = (status: number, response: string): void =>
      capture?.({ url: url.href, headers, body: Buffer.from(prepared.body).toString('utf8'), status, response, at });

    // Our own controller: the client leaving does not close the host's stream (its meta is read on).
    const ac = new AbortController();
    const firstTimer = setTimeout(() => ac.abort(), stream ? stallTimeoutMs : timeoutMs);
    let res: Dispatcher.ResponseData;
    try {
      res = await agent.request({ origin: url.origin, path: url.pathname, method: 'POST', headers, body: Buffer.from(prepared.body), signal: ac.signal });
    } catch (err) {
      clearTimeout(firstTimer);
      if (ac.signal.aborted) throw new HostError(stream ? 'stalled' : 'timeout', `${label} did not answer in time`);
      const code = (err as { code?: string } | null)?.code;
      throw new HostError('unreachable', `${label} unreachable: ${code ? `${code}: ` : ''}${(err as Error)?.message ?? String(err)}`);
    }
    clearTimeout(firstTimer);
    if (res.statusCode !== 200) {
      let text = '';
      try {
        for await (const c of res.body) {
          text += (c as Buffer).toString('utf8');
          if (text.length >= MAX_ERROR_BODY) break;
        }
      } catch {
        /* best effort */
      }
      exchanged(res.statusCode, text);
      throw refused(ctx, s, hostUrl, res.statusCode, text, label);
    }

    const pump = new EventPump(res.body, capture !== undefined);
    const finishCapture = () => exchanged(200, pump.text);
    const ask = clientAsk(call.body);
    const deadline = now() + timeoutMs;
    const fail = (err: unknown, usageSoFar?: Usage): HostError => {
      pump.close();
      if (err instanceof HostError) return err;
      if (err instanceof Stalled) return new HostError(stream ? 'stalled' : 'timeout', `${label} sent nothing for ${stream ? stallTimeoutMs : timeoutMs} ms`, undefined, usageSoFar);
      if (err instanceof HostEventError) return new HostError('bad_response', `${label}: ${err.message}`, undefined, usageSoFar);
      return new HostError('truncated', `${label} broke the stream: ${(err as Error)?.message ?? String(err)}`, undefined, usageSoFar);
    };

    // The receipt comes first, before execution: read it before answering the client, so a host
    // whose state is not ours fails the request with a status, not mid-stream.
    let first: string | undefined;
    try {
      first = await pump.next(stream ? stallTimeoutMs : Math.max(1, deadline - now()));
      if (first === undefined) throw new HostError('truncated', `${label} closed the stream before its receipt`);
      const ev = readHostEvent(first);
      if (ev.kind !== 'receipt') throw new HostError('bad_response', `${label} answered without a devshard_receipt first`);
      receiptOf(s, hostUrl, ev.receipt, nonce);
    } catch (err) {
      finishCapture();
      throw fail(err);
    }

    if (!stream) {
      let completion: (ChatCompletion & Record<string, unknown>) | undefined;
      let text: string | undefined;
      let done = false;
      try {
        for (;;) {
          const data = await pump.next(Math.max(1, deadline - now()));
          if (data === undefined) break;
          const ev = readHostEvent(data);
          if (ev.kind === 'meta') s.onMempool(ev.mempool, hostUrl);
          else if (ev.kind === 'done') done = true;
          else if (ev.kind === 'output' && !completion) {
            const v = ev.value as (ChatCompletion & Record<string, unknown>) | undefined;
            if (!v || typeof v !== 'object' || !Array.isArray(v.choices)) throw new HostError('bad_response', `${label} answered without choices`);
            if ((v as { error?: unknown }).error) throw new HostError('rejected', `${label} failed: ${messageOf(data)}`);
            if (cutAt !== undefined) {
              const cut = cutCompletion(v, cutAt) as typeof v;
              text = completionForClient(JSON.stringify(cut), cut, ask);
              completion = cut;
            } else {
              // completionForClient strips `v` in place: `text` is `v` as JSON, no need to parse it again.
              text = completionForClient(data, v, ask);
              completion = v;
            }
          }
        }
      } catch (err) {
        finishCapture();
        throw fail(err);
      }
      finishCapture();
      pump.close();
      if (!completion || !done) throw new HostError('truncated', `${label} closed the stream without ${completion ? '[DONE]' : 'the completion'}`);
      if (!isUsage(completion.usage)) {
        const msg = completion.choices[0]?.message as { content?: unknown } | undefined;
        const chars = typeof msg?.content === 'string' ? msg.content.length : 0;
        const prompt_tokens = countPromptTokens(call.body);
        const completion_tokens = countCompletionTokens(chars);
        completion.usage = { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
        return { kind: 'completion', completion };
      }
      return { kind: 'completion', completion, ...(text !== undefined ? { text } : {}) };
    }

    let reported: Usage | undefined;
    let contentChars = 0;
    const usage = (): Usage => {
      if (reported) return reported;
      const p = countPromptTokens(call.body);
      const c = countCompletionTokens(contentChars);
      return { prompt_tokens: p, completion_tokens: c, total_tokens: p + c };
    };
    const track = (v: unknown): void => {
      const chunk = v as { usage?: unknown; choices?: { delta?: { content?: unknown } }[] } | undefined;
      if (!chunk || typeof chunk !== 'object') return;
      if (isUsage(chunk.usage)) reported = chunk.usage;
      if (Array.isArray(chunk.choices)) for (const c of chunk.choices) if (typeof c?.delta?.content === 'string') contentChars += c.delta.content.length;
    };

    const cut = cutAt !== undefined ? new StreamCut(cutAt) : undefined;
    // v5: the answer's own lines, the evidence of an error-miss should it end in an error (error-miss.ts).
    const answer = rulesOf(s.protocol) === 'v5' ? new AnswerLines() : undefined;
    async function* chunks(): AsyncGenerator<ChatChunk> {
      let handedOff = false;
      let errorAnswer = false;
      try {
        for (;;) {
          const data = await pump.next(stallTimeoutMs);
          if (data === undefined) throw new HostError('truncated', `${label} closed the stream without [DONE]`, undefined, usage());
          const ev = readHostEvent(data);
          if (ev.kind !== 'meta') answer?.add(data);
          if (ev.kind === 'done') break;
          if (ev.kind === 'meta') {
            s.onMempool(ev.mempool, hostUrl);
            continue;
          }
          if (ev.kind !== 'output') continue;
          if (ev.value && typeof ev.value === 'object' && (ev.value as { error?: { message?: string } }).error) {
            const failed = new HostError('rejected', `${label} failed mid-stream: ${messageOf(data)}`, undefined, usage());
            if (answer) {
              // The executor still signs a Finish over this answer: hold it from now, read the
              // stream on to its meta without the client, then claim the miss (Z5 redundancy.go).
              errorAnswer = handedOff = true;
              s.pinFinish(nonce);
              void drain(ctx, s, hostUrl, pump, now() + drainMs, finishCapture, answer, () => errorMisses.answerEnded(s, hostUrl, nonce, answer));
            }
            throw failed;
          }
          track(ev.value);
          // Past the client's own max_tokens (a v5 floor raised it): read on for the meta, send nothing.
          const value = cut && ev.value && typeof ev.value === 'object' ? cut.take(ev.value as Record<string, unknown>) : ev.value;
          if (value === undefined) continue;
          for (const out of chunksForClient(value === ev.value ? data : JSON.stringify(value), value, ask)) yield JSON.parse(out) as ChatChunk;
        }
        // [DONE]: the meta follows at once; wait for it briefly, then read on without the client.
        handedOff = true;
        const rest = drain(ctx, s, hostUrl, pump, now() + drainMs, finishCapture);
        await Promise.race([rest, new Promise((r) => setTimeout(r, Math.min(drainMs, 1_000)).unref())]);
      } catch (err) {
        // An error answer's stream is the drain's now: neither captured nor closed here.
        if (errorAnswer) throw err;
        finishCapture();
        throw fail(err, usage());
      } finally {
        // The client stopped reading (or left): read the host's stream on for its Finish.
        if (!handedOff && !pump.closed) {
          void drain(ctx, s, hostUrl, pump, now() + drainMs, finishCapture);
        }
      }
    }

    return { kind: 'stream', chunks: chunks(), usage };
  };
}
