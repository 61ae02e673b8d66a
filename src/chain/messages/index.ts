export * from './create-devshard-escrow.js';
export * from './settle-devshard-escrow.js';
export * from './registry.js';
