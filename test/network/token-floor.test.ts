/**
 * The v5 max_tokens floor (Z5 cmd/devshardctl/request_filters.go applyTokenBudgetFloor) and the cut
 * of the answer at the client's own max_tokens.
 */
import { describe, expect, it } from 'vitest';
import { applyTokenFloor, cutCompletion, MIN_TOKENS_FLOOR, StreamCut } from '../../src/network/devshard/token-floor.js';

describe('applyTokenFloor (applyTokenBudgetFloor)', () => {
  it('raises max_tokens below 64 to 64, sets min_tokens, and keeps the client limit', () => {
    const body = { model: 'm', max_tokens: 10, messages: [] };
    const r = applyTokenFloor(body);
    expect(r.body).toMatchObject({ max_tokens: 64, min_tokens: 64 });
    expect(r.body).not.toHaveProperty('max_completion_tokens');
    expect(r.clientLimit).toBe(10);
    expect(body.max_tokens).toBe(10); // the client's body is not changed
  });

  it('raises max_completion_tokens with it when it was sent', () => {
    expect(applyTokenFloor({ max_tokens: 5, max_completion_tokens: 5 }).body).toMatchObject({ max_tokens: 64, max_completion_tokens: 64, min_tokens: 64 });
  });

  it('leaves a budget at or above the floor, and still sets min_tokens = min(max(min_tokens, 64), max_tokens)', () => {
    expect(applyTokenFloor({ max_tokens: 64 })).toEqual({ body: { max_tokens: 64, min_tokens: 64 }, clientLimit: undefined });
    expect(applyTokenFloor({ max_tokens: 500 }).body).toMatchObject({ max_tokens: 500, min_tokens: 64 });
    expect(applyTokenFloor({ max_tokens: 500, min_tokens: 100 }).body).toMatchObject({ min_tokens: 100 });
    expect(applyTokenFloor({ max_tokens: 500, min_tokens: 900 }).body).toMatchObject({ min_tokens: 500 });
    expect(MIN_TOKENS_FLOOR).toBe(64);
  });
});

const chunk = (tokens: string[], finish: string | null = null) => ({
  id: 'c',
  object: 'chat.completion.chunk',
  choices: [{ index: 0, delta: { content: tokens.join('') }, logprobs: { content: tokens.map((token) => ({ token, logprob: -0.1 })) }, finish_reason: finish }],
});

describe('StreamCut', () => {
  it('passes chunks until the limit, shortens the one that reaches it (finish_reason length), drops the rest but not usage', () => {
    const cut = new StreamCut(5);
    expect(cut.take(chunk(['a', 'b']))).toEqual(chunk(['a', 'b']));
    expect(cut.take(chunk(['c', 'd']))).toEqual(chunk(['c', 'd']));
    const last = cut.take(chunk(['e', 'f', 'g']))!;
    expect(last.choices).toMatchObject([{ delta: { content: 'e' }, finish_reason: 'length', logprobs: { content: [{ token: 'e' }] } }]);
    expect(cut.take(chunk(['h']))).toBeUndefined();
    const usage = { id: 'c', choices: [], usage: { prompt_tokens: 1, completion_tokens: 64, total_tokens: 65 } };
    expect(cut.take(usage)).toBe(usage);
  });

  it('counts a chunk without logprobs as one token', () => {
    const cut = new StreamCut(2);
    const plain = { choices: [{ index: 0, delta: { content: 'xy' }, finish_reason: null }] };
    expect(cut.take(plain)).toBe(plain);
    expect(cut.take(plain)).toMatchObject({ choices: [{ delta: { content: 'xy' }, finish_reason: 'length' }] });
    expect(cut.take(plain)).toBeUndefined();
  });
});

describe('cutCompletion', () => {
  const whole = (tokens: string[]) => ({ object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: tokens.join('') }, logprobs: { content: tokens.map((token) => ({ token })) }, finish_reason: 'stop' }] });

  it('cuts the first choice at the limit by its logprob tokens', () => {
    expect(cutCompletion(whole(['He', 'llo', ' wor', 'ld']), 2)).toMatchObject({ choices: [{ message: { content: 'Hello' }, finish_reason: 'length', logprobs: { content: [{ token: 'He' }, { token: 'llo' }] } }] });
  });

  it('leaves an answer that fits, or one without logprobs', () => {
    const c = whole(['a', 'b']);
    expect(cutCompletion(c, 2)).toBe(c);
    const bare = { choices: [{ message: { content: 'long text' } }] };
    expect(cutCompletion(bare, 1)).toBe(bare);
  });
});
