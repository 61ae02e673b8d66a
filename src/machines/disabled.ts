/**
 * The gateway kill switch (spec: off -> on when settings set disabled.enabled true; on -> off when
 * false). While on, non-admin requests get 308 with `message` and `new_url`.
 */
import { assertEvent, assign, setup } from 'xstate';
import type { CatalogEventOf } from '../events/catalog.js';

export type DisabledEvent = CatalogEventOf<'GatewayDisabled' | 'GatewayEnabled'>;

export interface DisabledContext {
  message: string;
  newUrl: string;
}

/** The kill-switch statechart. */
export const disabledMachine = setup({
  types: {
    context: {} as DisabledContext,
    events: {} as DisabledEvent,
  },
  actions: {
    record: assign(({ event }) => {
      assertEvent(event, 'GatewayDisabled');
      return { message: event.data.message, newUrl: event.data.newUrl };
    }),
    clear: assign({ message: '', newUrl: '' }),
  },
}).createMachine({
  id: 'disabled',
  initial: 'off',
  context: { message: '', newUrl: '' },
  states: {
    off: { on: { GatewayDisabled: { target: 'on', actions: 'record' } } },
    /** A second GatewayDisabled updates the message / URL without leaving `on`. */
    on: {
      on: {
        GatewayDisabled: { actions: 'record' },
        GatewayEnabled: { target: 'off', actions: 'clear' },
      },
    },
  },
});
