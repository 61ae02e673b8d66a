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
  // Values built with sorted keys (the hot path's events are) are what JSON.stringify writes.
  if (isCanonicalPlain(value)) return JSON.stringify(value);
  return canonicalJsonByWalk(value, path);
}

/**
 * An object or array whose JSON.stringify text is canonical and parses back to an equal value
 * (see inCanonicalForm): the store can then keep the value itself instead of parsing its text.
 */
export function isCanonicalPlain(value: unknown): value is object {
  return typeof value === 'object' && value !== null && inCanonicalForm(value);
}

/** The general path (for callers that already know the value is not plain, and the test that pins the fast path equal to it). */
export function canonicalJsonByWalk(value: unknown, path = '$'): string {
  let out: string | undefined;
  try {
    out = write(value);
  } catch (error) {
    if (error !== REFUSED) throw error;
    // Slow second walk, only on failure, to say where: the fast path builds no path strings.
    throw locate(value, path) ?? new CanonicalJsonError('value is not JSON-serializable', path);
  }
  if (out === undefined) throw new CanonicalJsonError('value is not JSON-serializable (undefined)', path);
  return out;
}

const REFUSED = Symbol('refused');

/**
 * True when JSON.stringify(value) is already canonical: plain data only (strings, finite numbers,
 * booleans, null, arrays, objects without toJSON), every object's keys enumerated in sorted order,
 * and no undefined anywhere (so the text parses back to an equal value). Anything else takes the
 * general path, which gives the same text or the same refusal.
 */
function inCanonicalForm(value: object): boolean {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!plainMember(value[i])) return false;
    return true;
  }
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return false;
  const keys = Object.keys(value);
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && !(keys[i - 1]! < keys[i]!)) return false;
    if (!plainMember((value as Record<string, unknown>)[keys[i]!])) return false;
  }
  return true;
}

function plainMember(v: unknown): boolean {
  switch (typeof v) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      // -0 is written "0", which parses back as 0: not the same value, so not plain.
      return Number.isFinite(v) && !Object.is(v, -0);
    case 'object':
      return v === null || inCanonicalForm(v);
    default:
      return false;
  }
}

function write(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw REFUSED;
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      return undefined;
    case 'bigint':
    case 'function':
    case 'symbol':
      throw REFUSED;
  }
  if (value === null) return 'null';
  const obj = value as Record<string, unknown> & { toJSON?: () => unknown };
  if (typeof obj.toJSON === 'function') return write(obj.toJSON());
  if (Array.isArray(value)) {
    let s = '[';
    for (let i = 0; i < value.length; i++) {
      if (i > 0) s += ',';
      s += write(value[i]) ?? 'null';
    }
    return s + ']';
  }
  const keys = Object.keys(obj).sort();
  let s = '{';
  for (const key of keys) {
    const member = write(obj[key]);
    if (member === undefined) continue;
    if (s.length > 1) s += ',';
    s += JSON.stringify(key) + ':' + member;
  }
  return s + '}';
}

/** The first refused value inside `value`, as an error naming its path. */
function locate(value: unknown, path: string): CanonicalJsonError | undefined {
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? undefined : new CanonicalJsonError(`non-finite number ${value}`, path);
    case 'bigint':
      return new CanonicalJsonError('bigint is not allowed in event data (store amounts as decimal strings)', path);
    case 'function':
    case 'symbol':
      return new CanonicalJsonError(`${typeof value} is not JSON-serializable`, path);
    case 'object': {
      if (value === null) return undefined;
      const obj = value as Record<string, unknown> & { toJSON?: () => unknown };
      if (typeof obj.toJSON === 'function') return locate(obj.toJSON(), path);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const found = locate(value[i], `${path}[${i}]`);
          if (found) return found;
        }
        return undefined;
      }
      for (const key of Object.keys(obj).sort()) {
        const found = locate(obj[key], `${path}.${key}`);
        if (found) return found;
      }
      return undefined;
    }
    default:
      return undefined;
  }
}
