/**
 * Turns an ajv validation error (fastify schema validation) into an OpenAI-style 400 that names the
 * offending parameter the way OpenAI does (`messages[0].role`, `temperature`). Messages never
 * contain the submitted value: a rejected `private_key` must not be echoed back or logged.
 */
import { clip } from '../gateway/errors.js';
import { ApiError } from './api-error.js';

/** The subset of an ajv ErrorObject we read. */
export interface AjvErrorLike {
  keyword: string;
  instancePath: string;
  /** `#/properties/amount/anyOf`: where in the route's schema the rule is (names an anyOf's forms). */
  schemaPath?: string;
  params: Record<string, unknown>;
  message?: string;
}

/** Field-specific explanations for pattern/format failures (a regex is no help to a user). */
const PATTERN_HINTS: Record<string, string> = {
  private_key: 'must be 64 hexadecimal characters without a 0x prefix',
  private_key_env: 'must be an environment variable name matching ^[A-Z_][A-Z0-9_]*$ (upper-case letters, digits and underscores, not starting with a digit, at most 128 characters), such as DEVSHARD_PRIVATE_KEY',
  escrow_id: 'must be a numeric escrow id',
  id: 'must be a numeric escrow id',
  amount: 'must be a positive integer in the smallest coin unit',
  name: 'must be 1 to 64 characters of a-z, A-Z, 0-9, underscores or dashes',
  // amounts in event data (an import's events) and in an exported devshard view
  ...Object.fromEntries(
    ['spent', 'cost', 'reservedCost', 'balance', 'reserved', 'usable_balance', 'threshold', 'refund', 'fees'].map((k) => [k, 'must be a decimal string of an amount in the smallest coin unit']),
  ),
  hash: 'must be 64 lowercase hexadecimal characters',
  prev_hash: 'must be 64 lowercase hexadecimal characters (or empty before the first event)',
};

/** `/messages/0/role` -> `messages[0].role` */
export function pointerToParam(pointer: string): string {
  let out = '';
  for (const raw of pointer.split('/').slice(1)) {
    const seg = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(seg) ? `[${seg}]` : out === '' ? seg : `.${seg}`;
  }
  return out;
}

function join(base: string, child: string): string {
  return base === '' ? child : `${base}.${child}`;
}

function lastKey(param: string): string {
  const m = /([A-Za-z_][A-Za-z0-9_]*)(\[\d+\])*$/.exec(param);
  return m?.[1] ?? param;
}

function describeType(t: unknown): string {
  const list = (Array.isArray(t) ? t : String(t).split(',')).filter((x) => x !== 'null');
  const names = list.map((x) => (x === 'integer' ? 'an integer' : x === 'array' ? 'an array' : x === 'object' ? 'an object' : `a ${x}`));
  return names.join(' or ') || 'null';
}

/** What an anyOf/oneOf field accepts, for fields whose accepted forms differ in type. */
const ALTERNATIVE_HINTS: Record<string, string> = {
  amount: 'must be a positive integer (or a decimal string of one) in the smallest coin unit',
  tool_choice: "must be 'auto', 'none', 'required' or {\"type\":\"function\",\"function\":{\"name\":...}}",
};

/** The subschema at a JSON pointer (`#/properties/x/anyOf`) of a route's schema, if it resolves. */
function atPointer(schema: unknown, pointer: string | undefined): unknown {
  if (!pointer?.startsWith('#')) return undefined;
  let node: unknown = schema;
  for (const raw of pointer.slice(1).split('/').slice(1)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[decodeURIComponent(raw.replace(/~1/g, '/').replace(/~0/g, '~'))];
  }
  return node;
}

const quoteValue = (v: unknown): string => (typeof v === 'string' ? `'${v}'` : JSON.stringify(v));

/** One accepted form of an anyOf/oneOf, in words: `an integer >= 1`, `a string matching ^[0-9]+$`. */
function describeForm(form: unknown): string | undefined {
  if (form === null || typeof form !== 'object') return undefined;
  const f = form as Record<string, unknown>;
  if ('const' in f) return quoteValue(f.const);
  if (Array.isArray(f.enum)) return f.enum.map(quoteValue).join(', ');
  if (f.type === 'string' && f.maxLength === 0) return 'an empty string';
  const parts: string[] = [];
  if (f.type !== undefined) parts.push(describeType(f.type) === 'null' ? 'null' : describeType(f.type));
  if (typeof f.minimum === 'number') parts.push(`>= ${f.minimum}`);
  if (typeof f.maximum === 'number') parts.push(`<= ${f.maximum}`);
  if (typeof f.pattern === 'string') parts.push(`matching ${f.pattern}`);
  if (Array.isArray(f.required) && f.required.length > 0) {
    const names = f.required.map((r) => `'${String(r)}'`).join(' and ');
    parts.push(parts.length === 0 ? `an object with ${names}` : `with ${names}`);
  }
  return parts.length > 0 ? parts.join(' ') : undefined;
}

/** `an integer >= 0, or a string matching ^[0-9]{1,20}$`: the forms an anyOf accepts, when each can be said. */
export function describeForms(forms: unknown): string | undefined {
  if (!Array.isArray(forms) || forms.length === 0) return undefined;
  const described = forms.map(describeForm);
  if (described.some((d) => d === undefined)) return undefined;
  return described.length === 1 ? described[0] : `${described.slice(0, -1).join('; ')}; or ${described.at(-1)}`;
}

/**
 * `schema`: the route's schema for this context (body, params, ...), so an anyOf/oneOf refusal
 * names the forms it accepts; without it the message says only that none matched.
 */
export function formatValidationError(errs: readonly AjvErrorLike[], context: string | undefined, schema?: unknown): ApiError {
  // ajv lists the failing branches of an anyOf before the anyOf itself; the anyOf names the field.
  const alt = errs.find((x) => x.keyword === 'anyOf' || x.keyword === 'oneOf');
  const e = alt ?? errs[0];
  const where = context && context !== 'body' ? `${context} ` : '';
  if (!e) return new ApiError(400, 'Invalid request.', { code: 'invalid_value' });
  const base = pointerToParam(e.instancePath);
  const p = e.params;
  const shown = (param: string) => (param === '' ? `the ${context ?? 'body'}` : `'${param}'`);
  const make = (param: string, message: string, code: string) =>
    new ApiError(400, message, { param: param === '' ? null : param, code });

  switch (e.keyword) {
    case 'required': {
      const param = join(base, String(p.missingProperty));
      return make(param, `Missing required ${where}parameter: '${param}'.`, 'missing_required_parameter');
    }
    case 'additionalProperties': {
      // The name is the client's: cut (a 300 KB member name came back twice, in message and param).
      const param = join(base, clip(String(p.additionalProperty), 128));
      return make(param, `Unrecognized ${where}parameter: '${param}'.`, 'unknown_parameter');
    }
    case 'type':
      return make(base, `Invalid type for ${shown(base)}: expected ${describeType(p.type)}.`, 'invalid_type');
    case 'minimum':
    case 'exclusiveMinimum':
      return make(base, `Invalid value for ${shown(base)}: must be ${e.keyword === 'minimum' ? '>=' : '>'} ${String(p.limit)}.`, 'value_below_min');
    case 'maximum':
    case 'exclusiveMaximum':
      return make(base, `Invalid value for ${shown(base)}: must be ${e.keyword === 'maximum' ? '<=' : '<'} ${String(p.limit)}.`, 'value_above_max');
    case 'minItems':
      return Number(p.limit) === 1
        ? make(base, `Invalid ${shown(base)}: empty array. Expected an array with minimum length 1.`, 'empty_array')
        : make(base, `Invalid ${shown(base)}: expected at least ${String(p.limit)} items.`, 'array_below_min_length');
    case 'maxItems':
      return make(base, `Invalid ${shown(base)}: expected at most ${String(p.limit)} items.`, 'array_above_max_length');
    case 'minLength':
      return make(base, `Invalid ${shown(base)}: must not be empty.`, 'invalid_value');
    case 'maxLength':
      return make(base, `Invalid ${shown(base)}: must be at most ${String(p.limit)} characters.`, 'string_above_max_length');
    case 'enum':
      return make(base, `Invalid value for ${shown(base)}: supported values are ${(p.allowedValues as unknown[]).map((v) => `'${String(v)}'`).join(', ')}.`, 'invalid_value');
    case 'const':
      return make(base, `Invalid value for ${shown(base)}: the only supported value is '${String(p.allowedValue)}'.`, 'invalid_value');
    case 'pattern':
    case 'format': {
      const hint = PATTERN_HINTS[lastKey(base)] ?? (e.keyword === 'format' ? `must be a valid ${String(p.format)}` : 'has an invalid format');
      return make(base, `Invalid value for ${shown(base)}: ${hint}.`, 'invalid_value');
    }
    case 'anyOf':
    case 'oneOf':
    {
      const forms = describeForms(atPointer(schema, e.schemaPath));
      const hint = ALTERNATIVE_HINTS[lastKey(base)] ?? (forms ? `expected ${forms}` : 'it does not match any accepted form');
      return make(base, `Invalid value for ${shown(base)}: ${hint}.`, 'invalid_value');
    }
    default:
      // ajv's message describes the rule, never the value.
      return make(base, `Invalid ${shown(base)}: ${e.message ?? 'invalid value'}.`, 'invalid_value');
  }
}
