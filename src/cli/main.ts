#!/usr/bin/env node
import { Command } from 'commander';
import { registerServe } from './commands/serve.js';
import { registerDevnet } from './commands/devnet.js';
import { registerInit } from './commands/init.js';
import { registerReplay } from './commands/replay.js';
import { registerVerify } from './commands/verify.js';
import { registerDiagram } from './commands/diagram.js';
import { registerExplain } from './commands/explain.js';
import { registerHealthcheck } from './commands/healthcheck.js';
import { registerMigrate } from './commands/migrate.js';

const program = new Command()
  .name('shardgate')
  .description('OpenAI-compatible inference gateway with an event-sourced escrow engine');

for (const register of [registerServe, registerDevnet, registerInit, registerReplay, registerVerify, registerDiagram, registerExplain, registerHealthcheck, registerMigrate]) {
  register(program);
}

await program.parseAsync(process.argv);
