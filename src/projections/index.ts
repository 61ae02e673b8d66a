/** Folds of the log for reads: router pool, status, settings, rotation debug; an escrow's timeline read when asked. */
export * from './escrow-pool.js';
export * from './settings.js';
export * from './status.js';
export * from './rotation-debug.js';
export * from './timeline.js';
export * from './projections.js';
export * from './from-store.js';
export { actorLabel } from './actor.js';
export * from './replay.js';
