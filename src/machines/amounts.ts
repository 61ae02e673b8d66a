/** Decimal-string amount arithmetic: amounts stay strings in events and context (JSON-safe). */
import type { Amount } from '../events/catalog.js';

export const add = (a: Amount, b: Amount): Amount => (BigInt(a) + BigInt(b)).toString();
export const sub = (a: Amount, b: Amount): Amount => (BigInt(a) - BigInt(b)).toString();
/** a <= b */
export const lte = (a: Amount, b: Amount): boolean => BigInt(a) <= BigInt(b);
