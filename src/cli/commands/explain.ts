import type { Command } from 'commander';

// Placeholder until the owning issue lands; registers nothing.
export function registerExplain(_program: Command): void {}
