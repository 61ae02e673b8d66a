import type { Actor } from '../events/envelope.js';

/** One-word actor label for timelines: `admin`, `client:<keyId>`, `rotation-task`, ... */
export function actorLabel(actor: Actor | undefined): string {
  if (!actor) return 'unknown';
  return actor.kind === 'client' ? `client:${actor.keyId}` : actor.kind;
}
