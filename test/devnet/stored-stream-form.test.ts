/**
 * A simulated host stores a streamed answer as a real one does: Go's json.Marshal of
 * `{"events":[…]}`, which escapes `<`, `>` and `&` (encoding/json's HTML-safe default), so its
 * response_hash is what a real host would sign for the same text.
 */
import { describe, expect, it } from 'vitest';
import { sha256, utf8 } from '../../src/protocol/bytes.js';
import { streamedPayloadFor } from '../../src/protocol/error-answer.js';
import { plannedOutput, responseHash } from '../../src/devnet/hosts/protocol/output.js';

const plan = { pieces: ['a <b>', ' & c'], content: 'a <b> & c', finishReason: 'stop' as const, promptTokens: 3, completionTokens: 2 };

describe('simulated host: the stored form of a streamed answer', () => {
  it('escapes <, > and & as Go does, and its response_hash covers exactly that form', () => {
    const out = plannedOutput(plan as never, { escrowId: '7', inferenceId: 1n, model: 'm', created: 1, stream: true });
    expect(out.hashed).toContain('a \\u003cb\\u003e');
    expect(out.hashed).toContain(' \\u0026 c');
    expect(out.hashed).not.toMatch(/[<>&]/);
    expect(Buffer.from(responseHash(out)).toString('hex')).toBe(Buffer.from(sha256(utf8(out.hashed))).toString('hex'));
    // The gateway finds that form from the lines it received (error-miss claims carry it).
    const lines = out.events.map((e) => `data: ${e}`);
    expect(Buffer.from(streamedPayloadFor(lines, responseHash(out))!).toString('utf8')).toBe(out.hashed);
  });
});
