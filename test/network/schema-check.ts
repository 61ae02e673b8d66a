/** A minimal JSON Schema checker for the subset the tests' tools use (types, required, enum, items, bounds). */
export function violations(value: unknown, schema: any, path = '$'): string[] {
  const out: string[] = [];
  if (schema.enum) {
    if (!schema.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(value))) out.push(`${path}: ${JSON.stringify(value)} not in enum`);
    return out;
  }
  const t = Array.isArray(schema.type) ? schema.type : [schema.type];
  const typeOk = t.some((ty: string) => {
    switch (ty) {
      case 'string': return typeof value === 'string';
      case 'number': return typeof value === 'number';
      case 'integer': return Number.isInteger(value);
      case 'boolean': return typeof value === 'boolean';
      case 'array': return Array.isArray(value);
      case 'object': return !!value && typeof value === 'object' && !Array.isArray(value);
      case 'null': return value === null;
      default: return true;
    }
  });
  if (!typeOk) return [`${path}: ${JSON.stringify(value)} is not ${t.join('|')}`];
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) out.push(`${path}: below minimum`);
    if (schema.maximum !== undefined && value > schema.maximum) out.push(`${path}: above maximum`);
  }
  if (typeof value === 'string') {
    if (schema.minLength !== undefined && value.length < schema.minLength) out.push(`${path}: shorter than minLength`);
    if (schema.maxLength !== undefined && value.length > schema.maxLength) out.push(`${path}: longer than maxLength`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) out.push(`${path}: fewer than minItems`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) out.push(`${path}: more than maxItems`);
    if (schema.items) value.forEach((v, i) => out.push(...violations(v, schema.items, `${path}[${i}]`)));
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    for (const r of schema.required ?? []) if (!(r in obj)) out.push(`${path}.${r}: required but missing`);
    for (const [k, v] of Object.entries(obj)) {
      const ps = schema.properties?.[k];
      if (ps) out.push(...violations(v, ps, `${path}.${k}`));
      else if (schema.additionalProperties === false) out.push(`${path}.${k}: not allowed`);
    }
  }
  return out;
}
