/**
 * A small seeded PRNG (sfc32) so simulated answers are a pure function of the request: the same
 * request always gets the same answer, on every host and every run.
 */
import { createHash } from 'node:crypto';

export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** Seeds from the first 16 bytes of sha256(seedText). */
  constructor(seedText: string) {
    const h = createHash('sha256').update(seedText).digest();
    this.a = h.readUInt32LE(0);
    this.b = h.readUInt32LE(4);
    this.c = h.readUInt32LE(8);
    this.d = h.readUInt32LE(12);
    for (let i = 0; i < 12; i++) this.next();
  }

  /** Uniform in [0, 1). */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return (t >>> 0) / 4294967296;
  }

  /** Integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  /** `n` hex characters. */
  hex(n: number): string {
    let s = '';
    while (s.length < n) s += Math.floor(this.next() * 0x1_0000_0000).toString(16).padStart(8, '0');
    return s.slice(0, n);
  }
}

/** JSON with object keys sorted, so key order in a client's body does not change the seed. */
export function stableJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return '[' + value.map(stableJson).join(',') + ']';
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj)
    .filter((k) => obj[k] !== undefined)
    .sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + stableJson(obj[k])).join(',') + '}';
}
