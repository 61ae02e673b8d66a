/**
 * Canonical JSON: object keys sorted (UTF-16 code unit order, what `Array.prototype.sort` does),
 * no whitespace. The hash chain is computed over it, so the same value always hashes the same.
 *
 * Follows JSON.stringify where JSON is unambiguous (toJSON is honoured, undefined object members
 * are dropped) and refuses what would be silently lossy: bigint (amounts are decimal strings in
 * the catalog), NaN/Infinity, functions and symbols.
 */
export class CanonicalJsonError extends TypeError {
  constructor(
    message: string,
    /** JSON-pointer-like path of the offending value, e.g. `$.amount`. */
    readonly path: string,
  ) {
    super(`${message} at ${path}`);
    this.name = 'CanonicalJsonError';
  }
}

/** `path` names the value in error messages (e.g. `event[2].data`). */
export function canonicalJson(value: unknown, path = '$'): string {
  const out = write(value, path);
  if (out === undefined) throw new CanonicalJsonError('value is not JSON-serializable (undefined)', path);
  return out;
}

function write(value: unknown, path: string): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new CanonicalJsonError(`non-finite number ${value}`, path);
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return undefined;
    case 'bigint':
      throw new CanonicalJsonError('bigint is not allowed in event data (store amounts as decimal strings)', path);
    case 'function':
    case 'symbol':
      throw new CanonicalJsonError(`${typeof value} is not JSON-serializable`, path);
  }
  if (value === null) return 'null';
  const obj = value as Record<string, unknown> & { toJSON?: () => unknown };
  if (typeof obj.toJSON === 'function') return write(obj.toJSON(), path);
  if (Array.isArray(value)) {
    let s = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) s += ',';
      s += write(value[i], `${path}[${i}]`) ?? 'null';
    }
    return s + ']';
  }
  const keys = Object.keys(obj).sort();
  let s = '{';
  let first = true;
  for (const key of keys) {
    const member = write(obj[key], `${path}.${key}`);
    if (member === undefined) continue;
    if (!first) s += ',';
    first = false;
    s += JSON.stringify(key) + ':' + member;
  }
  return s + '}';
}
