/** How instances sharing a log spread the escrows (gateway/scale/share.ts), given the lease rows. */
import { describe, expect, it } from 'vitest';
import type { LeaseRow } from '../../src/events/leases.js';
import { decideShare } from '../../src/gateway/scale/share.js';

const held = (id: string, owner: string, expiresInMs = 5_000): LeaseRow => ({ name: `escrow:${id}`, owner, token: 1, expiresInMs, wantedBy: undefined });
const ids = (n: number) => Array.from({ length: n }, (_, i) => String(i + 1));

describe('decideShare', () => {
  it('an instance takes free escrows up to its fair share, ceil(escrows / live instances)', () => {
    const d = decideShare({ me: 'a', stopping: false, escrows: ids(5), leases: [], live: ['a', 'b'] });
    expect(d.fair).toBe(3);
    expect(d.take).toHaveLength(3);
    expect(d.want).toBeUndefined();
  });

  it('instances starting together order the free escrows differently, so they mostly pick different ones', () => {
    const input = { stopping: false, escrows: ids(12), leases: [], live: ['a', 'b', 'c'] };
    const a = decideShare({ ...input, me: 'a' }).take;
    const b = decideShare({ ...input, me: 'b' }).take;
    expect(a).toHaveLength(4);
    expect(a).not.toEqual(b);
  });

  it('expired and released leases are free; unexpired ones are not', () => {
    const leases = [held('1', 'b'), held('2', 'b', -1), { ...held('3', 'b'), owner: undefined }];
    const d = decideShare({ me: 'a', stopping: false, escrows: ids(3), leases, live: ['a'] });
    expect(d.take.sort()).toEqual(['2', '3']);
    expect([...d.holders]).toEqual([['1', 'b']]);
  });

  it('one below floor(escrows / live) asks the most loaded instance for one, one at a time', () => {
    const leases = ids(6).map((id) => held(id, Number(id) <= 5 ? 'b' : 'c'));
    const d = decideShare({ me: 'a', stopping: false, escrows: ids(6), leases, live: ['a', 'b', 'c'] });
    expect(d.take).toEqual([]);
    expect(Number(d.want)).toBeLessThanOrEqual(5); // one of b's
  });

  it('a balanced spread asks nothing (no escrow moves back and forth)', () => {
    const leases = [held('1', 'a'), held('2', 'b'), held('3', 'c'), held('4', 'c')];
    for (const me of ['a', 'b', 'c']) expect(decideShare({ me, stopping: false, escrows: ids(4), leases, live: ['a', 'b', 'c'] })).toMatchObject({ take: [], want: undefined });
  });

  it('a stopping instance takes and asks for nothing', () => {
    expect(decideShare({ me: 'a', stopping: true, escrows: ids(3), leases: [], live: ['b'] })).toMatchObject({ take: [], want: undefined });
  });
});
