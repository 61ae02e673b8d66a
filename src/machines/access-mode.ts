/**
 * Model access mode (spec: admin_only, the default, <-> api_key). One instance per model, fed the
 * model's ModelAccessModeChanged events from the `settings` stream.
 */
import { assertEvent, assign, setup } from 'xstate';
import type { AccessMode, CatalogEventOf } from '../events/catalog.js';

export type AccessModeEvent = CatalogEventOf<'ModelAccessModeChanged'>;

export interface AccessModeContext {
  model: string | null;
}

/** The access-mode statechart; its state value is the spec's mode name. */
export const accessModeMachine = setup({
  types: {
    context: {} as AccessModeContext,
    events: {} as AccessModeEvent,
    input: {} as { model?: string } | undefined,
  },
  guards: {
    toApiKey: ({ event }) => event.data.mode === 'api_key',
    toAdminOnly: ({ event }) => event.data.mode === 'admin_only',
  },
  actions: {
    remember: assign(({ event }) => {
      assertEvent(event, 'ModelAccessModeChanged');
      return { model: event.data.model };
    }),
  },
}).createMachine({
  id: 'accessMode',
  initial: 'admin_only',
  context: ({ input }) => ({ model: input?.model ?? null }),
  states: {
    /** Client keys are refused with 401 'requires an admin API key'. */
    admin_only: { on: { ModelAccessModeChanged: { guard: 'toApiKey', target: 'api_key', actions: 'remember' } } },
    api_key: { on: { ModelAccessModeChanged: { guard: 'toAdminOnly', target: 'admin_only', actions: 'remember' } } },
  },
});

export type AccessModeState = AccessMode;
