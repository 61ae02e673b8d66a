import type { Command } from 'commander';

// Placeholder until the owning issue lands; registers nothing.
export function registerServe(_program: Command): void {}
