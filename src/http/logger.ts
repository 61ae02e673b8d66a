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

export interface LoggerOptions {
  level?: string;
  /** Where lines go (default stdout); tests pass a stream to capture them. */
  stream?: DestinationStream;
  name?: string;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const config = {
    level: options.level ?? 'info',
    base: { name: options.name ?? 'shardgate' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  return options.stream ? pino(config, options.stream) : pino(config);
}
