/**
 * Generates a value valid for a JSON Schema (the subset tool `parameters` use in practice): types
 * string / number / integer / boolean / null / array / object (also type lists such as
 * ["string","null"]), enum, const, required and optional properties, anyOf / oneOf (first branch
 * that is not null-only), allOf (merged objects), local $ref (#/$defs/..., #/definitions/...), and
 * the usual bounds (minimum/maximum and their exclusive forms, minLength/maxLength,
 * minItems/maxItems). `pattern` and `format` beyond a few common formats are not honoured.
 */
import type { Prng } from './prng.js';

type Schema = Record<string, unknown>;

const WORDS = ['alpha', 'blue', 'cedar', 'delta', 'ember', 'fjord', 'grove', 'harbor', 'iris', 'juniper', 'kestrel', 'lumen', 'meadow', 'north', 'opal', 'pine'];
const MAX_DEPTH = 8;

function resolveRef(ref: string, root: Schema): Schema {
  const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
  if (!m) return {};
  const defs = root[m[1]!] as Record<string, Schema> | undefined;
  return defs?.[decodeURIComponent(m[2]!).replace(/~1/g, '/').replace(/~0/g, '~')] ?? {};
}

function typeOf(schema: Schema): string {
  const t = schema.type;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const nonNull = t.find((x) => x !== 'null');
    return typeof nonNull === 'string' ? nonNull : 'null';
  }
  if (schema.properties || schema.required) return 'object';
  if (schema.items) return 'array';
  return 'string';
}

function num(x: unknown): number | undefined {
  return typeof x === 'number' && Number.isFinite(x) ? x : undefined;
}

function genString(schema: Schema, rng: Prng): string {
  switch (schema.format) {
    case 'date-time':
      return `2024-0${rng.int(1, 9)}-1${rng.int(0, 9)}T12:00:00Z`;
    case 'date':
      return `2024-0${rng.int(1, 9)}-1${rng.int(0, 9)}`;
    case 'email':
      return `${rng.pick(WORDS)}@example.com`;
    case 'uri':
    case 'url':
      return `https://example.com/${rng.pick(WORDS)}`;
    case 'uuid':
      return `${rng.hex(8)}-${rng.hex(4)}-4${rng.hex(3)}-8${rng.hex(3)}-${rng.hex(12)}`;
    default:
      break;
  }
  const min = Math.max(0, num(schema.minLength) ?? 0);
  const max = num(schema.maxLength) ?? Infinity;
  let s = rng.pick(WORDS);
  if (rng.chance(0.5)) s += ' ' + rng.pick(WORDS);
  while (s.length < min) s += ' ' + rng.pick(WORDS);
  return s.length > max ? s.slice(0, max) : s;
}

function genNumber(schema: Schema, rng: Prng, integer: boolean): number {
  let lo = num(schema.minimum) ?? (num(schema.exclusiveMinimum) !== undefined ? num(schema.exclusiveMinimum)! : undefined);
  let hi = num(schema.maximum) ?? (num(schema.exclusiveMaximum) !== undefined ? num(schema.exclusiveMaximum)! : undefined);
  const exLo = schema.minimum === undefined && num(schema.exclusiveMinimum) !== undefined;
  const exHi = schema.maximum === undefined && num(schema.exclusiveMaximum) !== undefined;
  if (lo === undefined && hi === undefined) {
    lo = 0;
    hi = 100;
  } else if (lo === undefined) lo = hi! - 100;
  else if (hi === undefined) hi = lo + 100;
  if (integer) {
    let a = Math.ceil(lo!);
    let b = Math.floor(hi!);
    if (exLo && a === lo) a += 1;
    if (exHi && b === hi) b -= 1;
    return b < a ? a : rng.int(a, b);
  }
  const span = hi! - lo!;
  // Strictly inside the interval when it is exclusive; two decimals read like real arguments.
  let v = Math.round((lo! + span * (0.05 + 0.9 * rng.next())) * 100) / 100;
  if (v < lo! || v > hi! || (exLo && v === lo) || (exHi && v === hi)) v = lo! + span / 2;
  return v;
}

export function generateFromSchema(schema: unknown, rng: Prng, root?: Schema, depth = 0): unknown {
  if (!schema || typeof schema !== 'object') return genString({}, rng);
  let s = schema as Schema;
  const top = root ?? s;
  if (typeof s.$ref === 'string') s = resolveRef(s.$ref, top);
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return rng.pick(s.enum);
  for (const key of ['anyOf', 'oneOf'] as const) {
    const branches = s[key];
    if (Array.isArray(branches) && branches.length > 0) {
      const usable = branches.find((b) => (b as Schema)?.type !== 'null') ?? branches[0];
      return generateFromSchema(usable, rng, top, depth + 1);
    }
  }
  if (Array.isArray(s.allOf) && s.allOf.length > 0) {
    const merged: Schema = { type: 'object', properties: {}, required: [] };
    for (const part of s.allOf as Schema[]) {
      const p = typeof part.$ref === 'string' ? resolveRef(part.$ref, top) : part;
      Object.assign(merged.properties as Schema, (p.properties as Schema) ?? {});
      (merged.required as string[]).push(...((p.required as string[]) ?? []));
    }
    return generateFromSchema(merged, rng, top, depth + 1);
  }
  switch (typeOf(s)) {
    case 'null':
      return null;
    case 'boolean':
      return rng.chance(0.5);
    case 'integer':
      return genNumber(s, rng, true);
    case 'number':
      return genNumber(s, rng, false);
    case 'array': {
      const minItems = Math.max(0, num(s.minItems) ?? 0);
      const maxItems = Math.max(minItems, Math.min(num(s.maxItems) ?? 3, minItems + 3));
      const n = depth >= MAX_DEPTH ? minItems : rng.int(Math.max(minItems, Math.min(1, maxItems)), maxItems);
      const items = Array.isArray(s.items) ? undefined : s.items;
      const out: unknown[] = [];
      for (let i = 0; i < n; i++) {
        const itemSchema = Array.isArray(s.items) ? (s.items[i] ?? {}) : (items ?? {});
        out.push(generateFromSchema(itemSchema, rng, top, depth + 1));
      }
      return out;
    }
    case 'object': {
      const props = (s.properties as Record<string, unknown>) ?? {};
      const required = new Set(Array.isArray(s.required) ? (s.required as string[]) : []);
      const out: Record<string, unknown> = {};
      for (const [name, propSchema] of Object.entries(props)) {
        // Required ones always; optional ones about half the time (never past the depth limit).
        if (required.has(name) || (depth < MAX_DEPTH && rng.chance(0.5))) {
          out[name] = generateFromSchema(propSchema, rng, top, depth + 1);
        }
      }
      for (const name of required) if (!(name in out)) out[name] = genString({}, rng);
      return out;
    }
    default:
      return genString(s, rng);
  }
}
