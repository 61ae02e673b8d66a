/**
 * The process logger: pino JSON lines with secrets redacted (docs/architecture.md, principle 5). Redaction is
 * by path, so anything logged under these names is censored even if a handler logs a whole body.
 */
import { pino, type DestinationStream, type Logger } from 'pino';

/** Paths pino censors. `*` matches one level; common nestings are listed explicitly. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'request.headers.authorization',
  'headers.authorization',
  'authorization',
  ...['private_key', 'privateKey', 'api_key', 'apiKey', 'api_keys', 'apiKeys', 'admin_api_key', 'adminApiKey', 'key', 'secret', 'mnemonic', 'creatorPrivateKey'].flatMap((k) => [
    k,
    `*.${k}`,
    `*.*.${k}`,
    `*.*.*.${k}`,
  ]),
];

/** `json`: one JSON object a line (log collectors); `pretty`: one readable line per entry (a terminal). */
export type LogFormat = 'json' | 'pretty';
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'pretty'];

export interface LoggerOptions {
  level?: string;
  /** Where lines go (default stdout); tests pass a stream to capture them. */
  stream?: DestinationStream;
  name?: string;
  /** Default json. Pretty lines are formatted from the same (already redacted) JSON. */
  format?: LogFormat;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const config = {
    level: options.level ?? 'info',
    base: { name: options.name ?? 'shardgate' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  if (options.format === 'pretty') {
    const out = options.stream ?? process.stdout;
    return pino(config, prettyStream(out, { color: (out as { isTTY?: boolean }).isTTY === true }));
  }
  return options.stream ? pino(config, options.stream) : pino(config);
}

/**
 * LOG_FORMAT as given (json or pretty, any case), else pretty when the output is a terminal and
 * JSON otherwise (a container, a pipe, a file). An unknown value is an error message, not a guess.
 */
export function chooseLogFormat(value: string | undefined, isTTY: boolean): LogFormat | { error: string } {
  const v = value?.trim().toLowerCase();
  if (v === undefined || v === '') return isTTY ? 'pretty' : 'json';
  return (LOG_FORMATS as readonly string[]).includes(v) ? (v as LogFormat) : { error: `LOG_FORMAT must be json or pretty (got '${value!.slice(0, 32)}')` };
}

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const LEVEL_COLORS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };
/** Fields every line has, or that the line's head already shows. */
const HEAD_FIELDS = new Set(['level', 'time', 'msg', 'name', 'pid', 'hostname', 'v']);
/** A request line's head: `POST /v1/chat/completions 200 12.3ms`. */
const REQUEST_HEAD = ['method', 'url', 'status', 'latency_ms'];

const showValue = (v: unknown): string => (typeof v === 'string' ? (/^[^\s"=]+$/.test(v) ? v : JSON.stringify(v)) : JSON.stringify(v) ?? String(v));

/**
 * One pino JSON line as a readable one: `12:34:56.789Z INFO  message key=value ...`, the time
 * (UTC) from the line itself; a request line leads with method, path, status and latency; an
 * error's stack follows on indented lines. A line that is not JSON is passed through.
 */
export function formatPrettyLine(json: string, options: { color?: boolean } = {}): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof o.level === 'number' ? o.level : 30;
  const name = (LEVEL_NAMES[level] ?? String(o.level)).padEnd(5);
  const time = typeof o.time === 'number' ? `${new Date(o.time).toISOString().slice(11, 23)}Z` : '';
  const parts: string[] = [];
  if (time) parts.push(options.color ? `\x1b[90m${time}\x1b[0m` : time);
  parts.push(options.color ? `\x1b[${LEVEL_COLORS[level] ?? '0'}m${name}\x1b[0m` : name);
  const shown = new Set(HEAD_FIELDS);
  const msg = typeof o.msg === 'string' ? o.msg : '';
  if (msg === 'request' && typeof o.method === 'string') {
    for (const k of REQUEST_HEAD) shown.add(k);
    parts.push(o.method, String(o.url ?? o.route ?? ''), String(o.status ?? ''));
    if (typeof o.latency_ms === 'number') parts.push(`${o.latency_ms}ms`);
  } else if (msg) {
    parts.push(msg);
  }
  let stack = '';
  for (const [k, v] of Object.entries(o)) {
    if (shown.has(k) || v === undefined) continue;
    if (k === 'err' && v && typeof v === 'object') {
      const e = v as { type?: string; message?: string; stack?: string };
      parts.push(`err=${showValue(`${e.type ?? 'Error'}: ${e.message ?? ''}`)}`);
      if (typeof e.stack === 'string') stack = e.stack.split('\n').slice(1).map((l) => `    ${l.trim()}`).join('\n');
      continue;
    }
    parts.push(`${k}=${showValue(v)}`);
  }
  return `${parts.join(' ')}\n${stack ? `${stack}\n` : ''}`;
}

/** A pino destination writing pretty lines to `out` (synchronously, in order, as pino's own). */
export function prettyStream(out: DestinationStream, options: { color?: boolean } = {}): DestinationStream {
  return { write: (line: string) => void out.write(formatPrettyLine(line.endsWith('\n') ? line.slice(0, -1) : line, options)) };
}
