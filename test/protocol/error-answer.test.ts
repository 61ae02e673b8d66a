/**
 * The rule both sides of an error-miss run (Z5 common/completionapi/terminal_error.go
 * `IsTerminalErrorResponse`), and the stored form of a streamed answer the Finish hashes
 * (completionapi `SerializedStreamedResponse`, marshalled by Go's encoding/json).
 */
import { describe, expect, it } from 'vitest';
import { sha256 } from '../../src/protocol/bytes.js';
import { isTerminalErrorResponse, streamedPayloadFor, streamedPayloadForms } from '../../src/protocol/error-answer.js';

const enc = (v: unknown) => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
const stream = (...lines: string[]) => enc({ events: lines });
const content = (t: string) => `data: {"choices":[{"delta":{"content":${JSON.stringify(t)}}}]}`;

describe('IsTerminalErrorResponse', () => {
  it('given a stream with a top-level error object, then it is a terminal error (content before it included)', () => {
    expect(isTerminalErrorResponse(stream('data: {"error":{"message":"boom","type":"server_error"}}', 'data: [DONE]'))).toBe(true);
    expect(isTerminalErrorResponse(stream(content('hi'), 'data: {"error":{"code":"model_error","message":"x","type":"server_error"}}', 'data: [DONE]'))).toBe(true);
  });

  it('given object "error" with a non-empty message, then it is one; with an empty message, not', () => {
    expect(isTerminalErrorResponse(stream('data: {"object":"error","message":"bad"}'))).toBe(true);
    expect(isTerminalErrorResponse(stream('data: {"object":"error","message":""}'))).toBe(false);
  });

  it('given a data payload that is not JSON, then it is one (a host cannot veto with junk)', () => {
    expect(isTerminalErrorResponse(stream(content('a'), 'data: {not json', 'data: [DONE]'))).toBe(true);
  });

  it('given a clean stream, a whole (non-streamed) answer, or no payload, then it is not', () => {
    expect(isTerminalErrorResponse(stream(content('a'), 'data: [DONE]'))).toBe(false);
    expect(isTerminalErrorResponse(enc({ error: { message: 'boom', type: 'server_error' } }))).toBe(false);
    expect(isTerminalErrorResponse(new Uint8Array(0))).toBe(false);
    expect(isTerminalErrorResponse(enc({ events: [] }))).toBe(false);
  });

  it('given fields Go could not decode into its struct (a non-string type, an error that is not an object), then not', () => {
    expect(isTerminalErrorResponse(stream('data: {"error":{"message":"boom"},"type":3}'))).toBe(false);
    expect(isTerminalErrorResponse(stream('data: {"error":"boom"}'))).toBe(false);
    expect(isTerminalErrorResponse(enc({ events: ['data: {"error":{"message":"x"}}', 5] }))).toBe(false);
  });

  it('matches keys as Go does: case-insensitively, the last one winning', () => {
    expect(isTerminalErrorResponse(stream('data: {"ERROR":{"message":"boom"}}'))).toBe(true);
    expect(isTerminalErrorResponse(enc({ EVENTS: ['data: {"error":{"message":"boom"}}'] }))).toBe(true);
  });
});

describe('the stored form of a streamed answer', () => {
  const lines = [content('a < b && c > d'), 'data: {"error":{"message":"boom"}}', 'data: [DONE]'];

  it('is spelled as Go marshals it (HTML characters escaped) and as plain JSON', () => {
    const [go, plain] = streamedPayloadForms(lines).map((b) => Buffer.from(b).toString('utf8'));
    expect(go).toContain('a \\u003c b \\u0026\\u0026 c \\u003e d');
    expect(plain).toBe(JSON.stringify({ events: lines }));
    expect(JSON.parse(go!)).toEqual(JSON.parse(plain!));
  });

  it('has one spelling when nothing needs escaping', () => {
    expect(streamedPayloadForms([content('plain'), 'data: [DONE]'])).toHaveLength(1);
  });

  it('is picked by the hash the Finish signed, and nothing else', () => {
    for (const form of streamedPayloadForms(lines)) expect(streamedPayloadFor(lines, sha256(form))).toEqual(form);
    expect(streamedPayloadFor(lines, sha256(enc('other')))).toBeUndefined();
  });
});
