/**
 * Issue 39 item 3: deeply nested request JSON. A tool's `parameters` nested 5,000 deep was a 500
 * (a RangeError in countPromptTokens' JSON.stringify) and a `response_format.json_schema` nested
 * 50,000 deep passed validation and came back as a 502. Now: request JSON deeper than
 * MAX_JSON_DEPTH (64) levels is a 400 naming the param and the limit, and the token estimate
 * (jsonLength) never throws, whatever the depth.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, tooDeepParam } from '../../src/http/schemas/chat.js';
import { countPromptTokens, jsonLength } from '../../src/network/tokens.js';
import { disposeTestGateway, MODEL, startGatewayWithEscrow, type TestGateway } from '../helpers/gateway.js';

/** `{"a":{"a":...{}...}}` with `levels` objects, as text (JSON.stringify itself would overflow). */
const nestedText = (levels: number) => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);
/** The same as a value, built without recursion. */
function nestedValue(levels: number): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let at = root;
  for (let i = 1; i < levels; i++) at = (at.a = {}) as Record<string, unknown>;
  return root;
}

describe('the token estimate never throws on deep data', () => {
  it('jsonLength equals JSON.stringify(...).length on any JSON value', () => {
    fc.assert(fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => jsonLength(v) === JSON.stringify(v).length), { numRuns: 500 });
    const odd = { a: undefined, b: [undefined, () => 1, NaN, -0, 1e21, Infinity], c: 'é"\\\n\u2028', d: {} };
    expect(jsonLength(odd)).toBe(JSON.stringify(odd).length);
    expect(jsonLength([{ '': null, 'k"y': [true, false] }])).toBe(JSON.stringify([{ '': null, 'k"y': [true, false] }]).length);
  });

  it('countPromptTokens of tools nested 100,000 deep is a number, not a RangeError', () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: nestedValue(100_000) } }];
    const n = countPromptTokens({ messages: [{ role: 'user', content: 'hi' }], tools });
    // 100,000 levels of {"a": ... } : 5 + 1 characters each, about 150,000 tokens.
    expect(n).toBeGreaterThan(140_000);
  });

  it('tooDeepParam names the param at the first three named members', () => {
    expect(tooDeepParam({ tools: [{ function: { parameters: nestedValue(60) } }] })).toBeUndefined();
    expect(tooDeepParam({ tools: [{ function: { parameters: nestedValue(61) } }] })).toBe('tools[0].function.parameters');
    expect(tooDeepParam({ response_format: { json_schema: { schema: nestedValue(50_000) } } })).toBe('response_format.json_schema.schema');
    expect(tooDeepParam(nestedValue(MAX_JSON_DEPTH))).toBeUndefined();
    expect(tooDeepParam(nestedValue(MAX_JSON_DEPTH + 1))).toBe('a.a.a');
  });
});

describe('deep request JSON through HTTP: a 400 naming the param and the limit', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    ({ gw } = await startGatewayWithEscrow({ env: { LOG_LEVEL: 'warn' } }));
    // Client keys may use the model (it starts admin_only).
    const r = await gw.call('/v1/admin/settings', { body: { model_limits: [{ model_id: MODEL, access_mode: 'api_key' }] } });
    expect(r.status, r.text).toBe(200);
  });
  afterAll(() => disposeTestGateway(gw));

  const head = `{"model":${JSON.stringify(MODEL)},"messages":[{"role":"user","content":"hi"}],"max_tokens":8`;
  const chat = (text: string) => gw.call('/v1/chat/completions', { body: text, key: 'client' });

  function expectTooDeep(r: { status: number; json: any; text: string }, param: string) {
    expect(r.status, r.text.slice(0, 300)).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request_error', code: 'nesting_too_deep', param });
    expect(r.json.error.message).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
  }

  it('tools[].function.parameters nested 5,000 deep (was a 500)', async () => {
    const r = await chat(`${head},"tools":[{"type":"function","function":{"name":"f","parameters":${nestedText(5_000)}}}]}`);
    expectTooDeep(r, 'tools[0].function.parameters');
  });

  it('response_format.json_schema nested 50,000 deep (was a 502)', async () => {
    const r = await chat(`${head},"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${nestedText(50_000)}}}}`);
    expectTooDeep(r, 'response_format.json_schema.schema');
  });

  it('an unknown top-level field nested deep is refused too; a schema within the limit is served', async () => {
    expectTooDeep(await chat(`${head},"metadata":${nestedText(200)}}`), 'metadata.a.a');
    const ok = await chat(`${head},"tools":[{"type":"function","function":{"name":"f","parameters":${nestedText(40)}}}]}`);
    expect(ok.status, ok.text.slice(0, 300)).toBe(200);
  });
});
