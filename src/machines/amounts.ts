/** Decimal-string amount arithmetic: amounts stay strings in events and context (JSON-safe). */
import type { Amount } from '../events/catalog.js';

/**
 * Up to 15 decimal digits, no sign: exact as a double (< 2^53), so Number arithmetic gives the
 * same answer as BigInt at a fraction of the cost (the fold runs this several times per inference
 * event). Anything else (longer, signed, odd forms) takes the BigInt path, which parses it as before.
 */
function small(a: string): boolean {
  const n = a.length;
  if (n === 0 || n > 15) return false;
  for (let i = 0; i < n; i++) {
    const c = a.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

export const add = (a: Amount, b: Amount): Amount => (small(a) && small(b) ? String(Number(a) + Number(b)) : (BigInt(a) + BigInt(b)).toString());
export const sub = (a: Amount, b: Amount): Amount => (small(a) && small(b) ? String(Number(a) - Number(b)) : (BigInt(a) - BigInt(b)).toString());
/** a <= b */
export const lte = (a: Amount, b: Amount): boolean => (small(a) && small(b) ? Number(a) <= Number(b) : BigInt(a) <= BigInt(b));
