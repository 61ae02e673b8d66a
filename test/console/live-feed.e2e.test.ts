/**
 * The console's live feed over HTTP: server-sent events read with fetch and the admin key, a hello
 * frame with the log's position, then each committed event as it is committed; a stopping gateway
 * ends the open streams first instead of waiting on them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeTestGateway, MODEL, startTestGateway, type TestGateway } from '../helpers/gateway.js';

async function* frames(res: Response): AsyncGenerator<any> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let at: number;
    while ((at = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, at);
      buffer = buffer.slice(at + 2);
      const data = frame.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      if (data) yield JSON.parse(data);
    }
  }
}

describe('GET /v1/admin/console/live', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway();
  }, 60_000);
  afterAll(() => disposeTestGateway(gw));

  it('answers 401 without the admin key', async () => {
    expect((await gw.call('/v1/admin/console/live', { key: 'client' })).status).toBe(401);
    expect((await gw.call('/v1/admin/console/live', { key: 'none' })).status).toBe(401);
  });

  it('sends a hello with the position, then each committed event; a stopping gateway ends the stream', async () => {
    const res = await fetch(`${gw.url}/v1/admin/console/live`, { headers: { authorization: `Bearer ${gw.keys.adminApiKey}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const it = frames(res);
    const hello = (await it.next()).value;
    expect(hello).toEqual({ type: 'hello', position: gw.store.lastPosition() });
    const changed = await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    expect(changed.status).toBe(200);
    const next = (await it.next()).value;
    expect(next).toMatchObject({ type: 'event', event: { position: hello.position + 1, stream: 'settings', event: 'SettingsChanged', actor: 'admin' } });
    expect(next.event.details).toBeUndefined();
    // The stream ends when the gateway stops (preClose), not at the shutdown deadline.
    const stopped = gw.stop();
    const rest: unknown[] = [];
    for await (const frame of { [Symbol.asyncIterator]: () => it }) rest.push(frame);
    expect(rest.every((f) => (f as { type: string }).type === 'event')).toBe(true);
    await stopped;
  });
});
