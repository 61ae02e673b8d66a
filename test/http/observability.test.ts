/**
 * Issue 38 item 7: what an operator needs to see. Failure counters by reason (fed from the log),
 * every chat outcome counted (4xx included), an expected 503 logged once at warn without a stack,
 * 4xx lines carrying the error's code and param, and readable log lines on a terminal.
 */
import { Writable } from 'node:stream';
import type { Counter } from 'prom-client';
import { Subject } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { RecordedEvent } from '../../src/events/envelope.js';
import { refuse } from '../../src/gateway/errors.js';
import type { GatewayPort } from '../../src/gateway/port.js';
import { createAuthenticator } from '../../src/http/auth.js';
import { createHttpApp } from '../../src/http/app.js';
import { chooseLogFormat, createLogger, formatPrettyLine } from '../../src/http/logger.js';
import { countRecordedFailures, createGatewayMetrics, MetricsRegistry } from '../../src/http/metrics.js';
import { registerBrokerRoutes } from '../../src/http/routes/broker.js';
import { ADMIN_KEY, bearer, buildTestApp, captureLogs, CLIENT_KEY } from './helpers.js';

const MODEL = 'served/model';

let position = 0;
/** A recorded event as the log's subscription hands it over (only type and data matter here). */
function recorded(type: string, data: unknown): RecordedEvent {
  position += 1;
  return { position, streamId: 's', streamVersion: 0, type, schemaVersion: 1, data, metadata: {} as RecordedEvent['metadata'], time: '2020-01-01T00:00:00.000Z', prevHash: '', hash: '' };
}

async function counterValue(counter: Counter, labels: Record<string, string>): Promise<number | undefined> {
  const { values } = await counter.get();
  return values.find((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want))?.value;
}

describe('failure counters by reason, from the log', () => {
  it('counts create, settle and rotation failures by the chain error kind (and step)', async () => {
    const metrics = createGatewayMetrics(new MetricsRegistry({ defaultMetrics: false }));
    const events = new Subject<RecordedEvent>();
    const sub = countRecordedFailures(metrics, events);
    const chainError = (kind: string) => ({ kind, message: `chain said ${kind}` });
    events.next(recorded('EscrowCreateFailed', { intentId: 'i1', model: MODEL, role: 'target', epoch: 3, error: chainError('insufficient_funds') }));
    events.next(recorded('EscrowCreateFailed', { intentId: 'i2', model: MODEL, role: 'target', epoch: 3, error: chainError('insufficient_funds') }));
    events.next(recorded('EscrowCreateFailed', { intentId: 'i3', model: MODEL, role: 'target', epoch: 3, error: chainError('epoch_limit') }));
    events.next(recorded('EscrowSettleFailed', { reason: 'x', error: chainError('wrong_epoch') }));
    events.next(recorded('EscrowSettleFailed', { reason: 'x', error: chainError('timeout'), windowClosed: true }));
    events.next(recorded('RotationFailed', { model: MODEL, step: 'create_target', chain: {}, error: chainError('not_allowlisted'), suppress: true }));
    events.next(recorded('DepletionReplacementFailed', { model: MODEL, escrowId: '4', reason: 'depleted', chain: {}, error: chainError('unreachable'), suppress: false, step: 'settle' }));
    // Not a failure: not counted.
    events.next(recorded('EscrowSettled', { txHash: 'h', height: 1, refund: '0' }));
    sub.unsubscribe();

    expect(await counterValue(metrics.createFailures, { reason: 'insufficient_funds' })).toBe(2);
    expect(await counterValue(metrics.createFailures, { reason: 'epoch_limit' })).toBe(1);
    expect(await counterValue(metrics.settleFailures, { reason: 'wrong_epoch' })).toBe(1);
    expect(await counterValue(metrics.settleFailures, { reason: 'settle_window_closed' })).toBe(1);
    expect(await counterValue(metrics.rotationFailures, { step: 'create_target', reason: 'not_allowlisted' })).toBe(1);
    expect(await counterValue(metrics.rotationFailures, { step: 'depletion_settle', reason: 'unreachable' })).toBe(1);
    const text = await metrics.registry.render();
    expect(text).toContain('shardgate_escrow_create_failures_total{reason="insufficient_funds"} 2');
    expect(text).toContain('# TYPE shardgate_rotation_failures_total counter');
  });
});

describe('chat requests and their log lines', () => {
  const apps: { close(): Promise<unknown> }[] = [];
  afterEach(async () => {
    for (const a of apps.splice(0)) await a.close();
  });

  /** The real broker routes over a gateway stand-in whose openChat answers `openChat`. */
  function brokerApp(openChat: () => Promise<never>) {
    const logs = captureLogs();
    const metrics = createGatewayMetrics(new MetricsRegistry({ defaultMetrics: false }));
    const app = createHttpApp({ logger: createLogger({ level: 'info', stream: logs.stream }), metrics });
    const gateway = {
      servedModels: () => [MODEL],
      isServedModel: (m: string) => m === MODEL,
      chatSettings: () => ({ default_request_max_tokens: 100, request_max_tokens_cap: 200 }),
      openChat,
    } as unknown as GatewayPort;
    registerBrokerRoutes(app, gateway, metrics, createAuthenticator({ adminApiKey: ADMIN_KEY, apiKeys: [CLIENT_KEY] }));
    apps.push(app);
    return { app, logs, metrics };
  }
  const chat = (extra: Record<string, unknown> = {}) => ({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...extra });

  it('shardgate_chat_requests_total counts 4xx refused before the use case: 401 key, 400 schema, 400 cross-field rule, 415', async () => {
    const { app, metrics } = brokerApp(() => Promise.reject(refuse.unavailable('no escrow', 1, 'no_active_escrow')));
    expect((await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat() })).statusCode).toBe(401);
    expect((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(CLIENT_KEY), payload: chat({ temperature: '1' }) })).statusCode).toBe(400);
    expect((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(CLIENT_KEY), payload: chat({ tool_choice: 'required' }) })).statusCode).toBe(400);
    expect((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'content-type': 'text/plain' }, payload: 'hi' })).statusCode).toBe(415);
    // The use case's own refusal is counted once (by the handler), not twice.
    expect((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(CLIENT_KEY), payload: chat() })).statusCode).toBe(503);

    // The body was not read for the 401 or the 415: no model is known.
    expect(await counterValue(metrics.chatRequests, { model: '(unknown)', status: '401' })).toBe(1);
    expect(await counterValue(metrics.chatRequests, { model: '(unknown)', status: '415' })).toBe(1);
    expect(await counterValue(metrics.chatRequests, { model: MODEL, status: '400' })).toBe(2);
    expect(await counterValue(metrics.chatRequests, { model: MODEL, status: '503' })).toBe(1);
    expect(await counterValue(metrics.errors, { model: MODEL, code: 'invalid_type' })).toBe(1);
    expect(await counterValue(metrics.errors, { model: '(unknown)', code: 'invalid_api_key' })).toBe(1);
  });

  it('an expected 503 (no routable escrow) is one line, at warn, with its code and message and no stack', async () => {
    const { app, logs } = brokerApp(() => Promise.reject(refuse.unavailable("No active escrow serves model 'served/model' right now.", 1, 'no_active_escrow')));
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'x-request-id': 'req-503' }, payload: chat() });
    expect(res.statusCode).toBe(503);
    const lines = logs.parsed().filter((l) => l.reqId === 'req-503');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, msg: 'request', status: 503, error_code: 'no_active_escrow', error_message: expect.stringContaining('No active escrow') });
    expect(JSON.stringify(logs.lines)).not.toContain('stack');
    expect(logs.parsed().some((l) => (l.level as number) >= 50)).toBe(false);
  });

  it('4xx log lines carry the error code and param', async () => {
    const { app, logs } = buildTestApp();
    apps.push(app);
    const bad = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(CLIENT_KEY), 'x-request-id': 'req-400' }, payload: chat({ temperature: '1' }) });
    expect(bad.statusCode).toBe(400);
    const noKey = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'x-request-id': 'req-401' }, payload: chat() });
    expect(noKey.statusCode).toBe(401);
    const unknown = await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': 'req-404' } });
    expect(unknown.statusCode).toBe(404);
    const line = (id: string) => logs.parsed().find((l) => l.reqId === id && l.msg === 'request');
    expect(line('req-400')).toMatchObject({ status: 400, level: 30, error_code: 'invalid_type', error_param: 'temperature' });
    expect(line('req-401')).toMatchObject({ status: 401, error_code: 'invalid_api_key' });
    expect(line('req-401')).not.toHaveProperty('error_param');
    expect(line('req-404')).toMatchObject({ status: 404, error_code: 'unknown_route' });
  });
});

describe('LOG_FORMAT and the pretty lines', () => {
  it('chooses pretty on a terminal and JSON elsewhere; LOG_FORMAT decides when set; an unknown value is an error', () => {
    expect(chooseLogFormat(undefined, true)).toBe('pretty');
    expect(chooseLogFormat(undefined, false)).toBe('json');
    expect(chooseLogFormat('', false)).toBe('json');
    expect(chooseLogFormat('JSON', true)).toBe('json');
    expect(chooseLogFormat('pretty', false)).toBe('pretty');
    expect(chooseLogFormat('yaml', true)).toEqual({ error: expect.stringContaining('LOG_FORMAT must be json or pretty') });
  });

  it('formats a request line and a startup line readably, time from the line itself', () => {
    const request = JSON.stringify({ level: 30, time: 0, name: 'shardgate', msg: 'request', reqId: 'req-1', method: 'POST', url: '/v1/chat/completions', route: '/v1/chat/completions', status: 200, latency_ms: 12.5, model: 'a b' });
    expect(formatPrettyLine(request)).toBe('00:00:00.000Z INFO  POST /v1/chat/completions 200 12.5ms reqId=req-1 route=/v1/chat/completions model="a b"\n');
    const startup = JSON.stringify({ level: 40, time: 1000, name: 'shardgate', msg: 'reconciled recorded chain intents', reconcile: { creates: [] } });
    expect(formatPrettyLine(startup)).toBe('00:00:01.000Z WARN  reconciled recorded chain intents reconcile={"creates":[]}\n');
    const failed = JSON.stringify({ level: 50, time: 0, msg: 'unexpected error', err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (x.js:1:1)' } });
    expect(formatPrettyLine(failed)).toBe('00:00:00.000Z ERROR unexpected error err="Error: boom"\n    at f (x.js:1:1)\n');
  });

  it('a pretty logger writes readable lines, secrets still redacted', () => {
    const out: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, cb) {
        out.push(chunk.toString('utf8'));
        cb();
      },
    });
    const logger = createLogger({ format: 'pretty', stream: stream as unknown as NodeJS.WritableStream & { write(s: string): boolean } });
    logger.info({ private_key: 'a'.repeat(64) }, 'escrow requested');
    expect(out.join('')).toMatch(/^\d\d:\d\d:\d\d\.\d{3}Z INFO {2}escrow requested private_key=\[redacted\]\n$/);
  });
});
