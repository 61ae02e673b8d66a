/**
 * Where the devnet listens, and keeping escrow slot URLs valid across restarts.
 *
 * Slot URLs are absolute (`http://127.0.0.1:PORT/hosts/<i>`): the chain hands them out at escrow
 * creation and a gateway records them with the escrow, as it would a real host's address. So a
 * devnet restored from DEVNET_STATE and asked for an ephemeral port (0) listens on the port it
 * served on before, when that port is free, and the recorded URLs keep working. When it cannot
 * (the port is taken, or another port was asked for explicitly), it rewrites the slot URLs in its
 * state to the new origin, so its own answers are right; a gateway that recorded the old ones must
 * register the escrow again.
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ChainState } from './state.js';

export async function listenDevnet(app: FastifyInstance, state: ChainState, port: number): Promise<string> {
  const previous = port === 0 && state.baseUrl ? Number(new URL(state.baseUrl).port) : 0;
  if (previous > 0) {
    try {
      await app.listen({ host: '127.0.0.1', port: previous });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      await app.listen({ host: '127.0.0.1', port });
    }
  } else {
    await app.listen({ host: '127.0.0.1', port });
  }
  const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  rebaseSlotUrls(state, url);
  return url;
}

/** Points slot URLs served under the previous origin at `url`, and records `url` as the origin. */
export function rebaseSlotUrls(state: ChainState, url: string): void {
  const old = state.baseUrl;
  if (old && old !== url) {
    for (const escrow of Object.values(state.escrows)) {
      for (const slot of escrow.slots) if (slot.url.startsWith(`${old}/`)) slot.url = url + slot.url.slice(old.length);
    }
  }
  state.baseUrl = url;
}
