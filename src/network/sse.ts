/**
 * Incremental Server-Sent Events parser (the WHATWG event-stream format), fed raw bytes as they
 * arrive. Robust to chunk boundaries anywhere (inside a line, inside a CRLF pair, inside a UTF-8
 * sequence), to LF, CRLF and bare CR line endings, to comments (`: keep-alive`) and to multi-line
 * `data:` fields (joined with "\n").
 */

export interface SseEvent {
  /** `event:` field; "message" when absent. */
  event: string;
  data: string;
  id?: string;
}

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8');
  private pending = '';
  /** True when the previous chunk ended with CR: a LF starting the next one belongs to it. */
  private skipLeadingLf = false;
  private data: string[] = [];
  private event = '';
  private id: string | undefined;
  /** Data lines seen in the current event (an event with only comments is not dispatched). */
  private hasData = false;

  /** Parses a chunk of bytes, appending every completed event to `out`. */
  push(chunk: Uint8Array, out: SseEvent[]): void {
    this.feed(this.decoder.decode(chunk, { stream: true }), out);
  }

  /** Flushes at end of stream; a final event without its blank line is still delivered. */
  end(out: SseEvent[]): void {
    const rest = this.decoder.decode();
    if (rest) this.feed(rest, out);
    if (this.pending) {
      this.line(this.pending, out);
      this.pending = '';
    }
    this.dispatch(out);
  }

  private feed(text: string, out: SseEvent[]): void {
    const s = this.pending ? this.pending + text : text;
    this.pending = '';
    let start = 0;
    if (this.skipLeadingLf) {
      this.skipLeadingLf = false;
      if (s.charCodeAt(0) === 10) start = 1;
    }
    const n = s.length;
    for (let i = start; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(s.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < n) {
          if (s.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLeadingLf = true;
        }
      }
      start = i + 1;
    }
    if (start < n) this.pending = s.slice(start);
  }

  private line(line: string, out: SseEvent[]): void {
    if (line.length === 0) {
      this.dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 58 /* ':' comment */) return;
    const colon = line.indexOf(':');
    let field: string;
    let value: string;
    if (colon === -1) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      value = line.charCodeAt(colon + 1) === 32 ? line.slice(colon + 2) : line.slice(colon + 1);
    }
    switch (field) {
      case 'data':
        this.data.push(value);
        this.hasData = true;
        break;
      case 'event':
        this.event = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.id = value;
        break;
      default:
        // `retry` and unknown fields are ignored, as the format says.
        break;
    }
  }

  private dispatch(out: SseEvent[]): void {
    if (this.hasData) {
      const data = this.data.length === 1 ? this.data[0]! : this.data.join('\n');
      const ev: SseEvent = { event: this.event || 'message', data };
      if (this.id !== undefined) ev.id = this.id;
      out.push(ev);
    }
    this.data = [];
    this.hasData = false;
    this.event = '';
  }
}
