/**
 * `.env`-style files: `KEY=VALUE` per line, `#` comments, optional `export ` prefix, single quotes
 * (literal), double quotes (with \n, \t, \", \\ escapes), unquoted values with trailing ` # comment`
 * stripped. Errors name the line, never its value (the file holds keys).
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './errors.js';

const KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function parseEnvFile(text: string, source = 'env file'): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] ?? '').trim();
    if (line === '' || line.startsWith('#')) continue;
    const body = line.startsWith('export ') ? line.slice(7).trimStart() : line;
    const eq = body.indexOf('=');
    const key = eq < 0 ? body : body.slice(0, eq).trim();
    if (eq < 0 || !KEY.test(key)) {
      throw new ConfigError([{ variable: null, message: `${source}, line ${i + 1}: expected KEY=VALUE` }]);
    }
    let value = body.slice(eq + 1).trim();
    const quote = value[0];
    if (quote === '"' || quote === "'") {
      const end = findClosingQuote(value, quote);
      if (end < 0) throw new ConfigError([{ variable: key, message: `${source}, line ${i + 1}: unterminated quote in ${key}` }]);
      const inner = value.slice(1, end);
      value = quote === "'" ? inner : inner.replace(/\\([nrt"\\])/g, (_, c: string) => ({ n: '\n', r: '\r', t: '\t', '"': '"', '\\': '\\' })[c] ?? c);
    } else {
      value = value.replace(/\s+#.*$/, '');
    }
    out[key] = value;
  }
  return out;
}

function findClosingQuote(value: string, quote: string): number {
  for (let j = 1; j < value.length; j++) {
    if (value[j] === '\\' && quote === '"') j++;
    else if (value[j] === quote) return j;
  }
  return -1;
}

export function readEnvFile(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new ConfigError([{ variable: null, message: `cannot read env file ${path} (${code})` }]);
  }
  return parseEnvFile(text, path);
}

/** Quotes a value for an env file when it needs it (spaces, #, quotes). */
export function formatEnvValue(value: string): string {
  if (/^[A-Za-z0-9_./:@,+-]*$/.test(value)) return value;
  return `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;
}
