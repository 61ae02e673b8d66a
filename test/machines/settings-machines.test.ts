import { describe, expect, it } from 'vitest';
import { foldAccessMode, foldDisabled } from '../../src/machines/index.js';
import { ev } from './events.js';

describe('access mode statechart', () => {
  it('given nothing, then admin_only (the default)', () => {
    expect(foldAccessMode('m1', []).value).toBe('admin_only');
  });
  it('given api_key set for the model, then api_key; other models stay admin_only', () => {
    const events = [ev.accessMode('m1', 'api_key')];
    expect(foldAccessMode('m1', events).value).toBe('api_key');
    expect(foldAccessMode('m2', events).value).toBe('admin_only');
  });
  it('given api_key, when set back to admin_only, then admin_only; a no-op change is refused', () => {
    const s = foldAccessMode('m1', [ev.accessMode('m1', 'api_key')]);
    expect(s.can(ev.accessMode('m1', 'api_key'))).toBe(false);
    expect(foldAccessMode('m1', [ev.accessMode('m1', 'api_key'), ev.accessMode('m1', 'admin_only')]).value).toBe('admin_only');
  });
});

describe('kill switch statechart', () => {
  it('given off, when disabled, then on with message and new_url', () => {
    const s = foldDisabled([ev.disabled('go away', 'https://x/v1')]);
    expect(s.value).toBe('on');
    expect(s.context).toEqual({ message: 'go away', newUrl: 'https://x/v1' });
  });
  it('given on, when disabled again, then the message is updated; when enabled, then off', () => {
    expect(foldDisabled([ev.disabled('a'), ev.disabled('b')]).context.message).toBe('b');
    const off = foldDisabled([ev.disabled(), ev.enabled()]);
    expect(off.value).toBe('off');
    expect(off.can(ev.enabled())).toBe(false);
  });
});
