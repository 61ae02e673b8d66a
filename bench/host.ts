/**
 * The targets a load is sent to, and the zero-delay host every bench run starts: the simulated
 * OpenAI mount with no token delay (in this process, or in one of its own: host-process.ts).
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { StoreStats } from '../src/events/sqlite-store.js';
import { registerSimulatedOpenAi } from '../src/devnet/hosts/index.js';

export interface Target {
  name: string;
  /** Base URL; requests go to `${url}/v1/chat/completions`. */
  url: string;
  headers?: Record<string, string>;
  /** Store counters (gateway targets). */
  storeStats?: () => StoreStats;
  close(): Promise<void>;
}

/** Listens on an ephemeral loopback port; the base URL. */
export const listen = async (app: FastifyInstance): Promise<string> => {
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  return address.replace('localhost', '127.0.0.1');
};

/** A zero-delay OpenAI-compatible host: the simulated OpenAI mount with no token delay. */
export async function startHost(): Promise<Target> {
  const app = Fastify({ logger: false });
  registerSimulatedOpenAi(app, { tokenDelayMs: 0 });
  const url = await listen(app);
  return { name: 'host', url, close: () => app.close() };
}

