import { describe, expect, it } from 'vitest';
import { SseParser, type SseEvent } from '../../src/network/sse.js';

function parseInPieces(bytes: Uint8Array, sizes: number[]): SseEvent[] {
  const p = new SseParser();
  const out: SseEvent[] = [];
  let at = 0;
  let i = 0;
  while (at < bytes.length) {
    const n = sizes[i++ % sizes.length]!;
    p.push(bytes.subarray(at, at + n), out);
    at += n;
  }
  p.end(out);
  return out;
}

describe('SSE parser', () => {
  const text =
    ': keep-alive\r\n\r\n' +
    'data: {"a":"héllo – 世界"}\r\n\r\n' +
    'event: note\ndata: line one\ndata: line two\n\n' +
    ':comment only\n\n' +
    'data:no-space\r\r' +
    'id: 7\ndata: [DONE]\n\n';
  const expected = [
    { event: 'message', data: '{"a":"héllo – 世界"}' },
    { event: 'note', data: 'line one\nline two' },
    { event: 'message', data: 'no-space' },
    { event: 'message', data: '[DONE]', id: '7' },
  ];
  const bytes = new TextEncoder().encode(text);

  it('parses LF, CRLF and CR endings, comments and multi-line data', () => {
    expect(parseInPieces(bytes, [bytes.length])).toEqual(expected);
  });

  it('gives the same events whatever the chunk boundaries (byte by byte, mid UTF-8, mid CRLF)', () => {
    for (const sizes of [[1], [2], [3], [5, 1, 7], [13, 2]]) {
      expect(parseInPieces(bytes, sizes)).toEqual(expected);
    }
  });

  it('delivers a last event that lacks its blank line at end of stream', () => {
    expect(parseInPieces(new TextEncoder().encode('data: x'), [3])).toEqual([{ event: 'message', data: 'x' }]);
  });
});
