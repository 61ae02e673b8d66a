/**
 * The v5 height seed (Z5 user/heightsync_seed.go): quorum at seeded·2 ≥ hosts, the rest asked once
 * more, missed when declines make the quorum unreachable, the chat gate's budget, the gate off.
 */
import { describe, expect, it } from 'vitest';
import { HeightSeed, HeightSeedIncomplete, type SeedOutcome } from '../../../src/network/devshard/height-seed.js';

const anchored: SeedOutcome = { verdict: 'anchored', reason: 'ok' };
const omit: SeedOutcome = { verdict: 'retry_later', reason: 'omit' };
const declined: SeedOutcome = { verdict: 'declined', reason: '404 height-sync seed RPC disabled' };

describe('HeightSeed', () => {
  it('is ok once half of the hosts returned an Anchor, and asks the others once more', async () => {
    const asked: string[] = [];
    const answers: Record<string, SeedOutcome> = { a: anchored, b: anchored, c: omit, d: omit };
    const changes: string[] = [];
    const seed = new HeightSeed(['a', 'b', 'c', 'd'], async (h) => (asked.push(h), answers[h]!), { required: true, onChange: (s) => changes.push(s.state) });
    await seed.wait(10_000);
    expect(seed.status()).toMatchObject({ state: 'ok', seeded: 2, slots: 4 });
    expect(asked).toEqual(['a', 'b', 'c', 'd', 'c', 'd']);
    expect(changes).toEqual(['ok']);
  });

  it('one host of three is not a quorum; two are', async () => {
    let round = 0;
    const seed = new HeightSeed(['a', 'b', 'c'], async (h) => (h === 'a' || (h === 'b' && round++ > 0) ? anchored : omit), { required: true, retryInitialMs: 1 });
    await seed.wait(10_000);
    expect(seed.status()).toMatchObject({ state: 'ok', seeded: 2 });
  });

  it('is missed at once when declines make the quorum unreachable: chat is refused with the counts', async () => {
    const seed = new HeightSeed(['a', 'b', 'c'], async (h) => (h === 'a' ? anchored : declined), { required: true });
    const err = await seed.wait(10_000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HeightSeedIncomplete);
    expect((err as Error).message).toBe('not seeded yet, retry: 1/3 hosts returned a height anchor');
    expect(seed.status()).toMatchObject({ state: 'missed', outcomes: [{ host: 'a', verdict: 'anchored' }, { host: 'b', verdict: 'declined' }, { host: 'c', verdict: 'declined' }] });
    seed.stop();
  });

  it('a chat waits at most its budget on a pending seed, then is refused; once the hosts answer, chat goes on', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const seed = new HeightSeed(['a'], async () => (await held, anchored), { required: true });
    await expect(seed.wait(20)).rejects.toBeInstanceOf(HeightSeedIncomplete);
    expect(seed.status().state).toBe('pending');
    release();
    await seed.wait(10_000);
    expect(seed.status().state).toBe('ok');
  });

  it('with the gate off chat never waits, and a floor already known skips the seed', async () => {
    const never = new HeightSeed(['a'], () => new Promise<SeedOutcome>(() => {}), { required: false });
    await never.wait(10_000);
    const known = new HeightSeed(['a'], async () => declined, { required: true });
    known.skip();
    await known.wait(10_000);
    expect(known.status().state).toBe('ok');
  });
});
