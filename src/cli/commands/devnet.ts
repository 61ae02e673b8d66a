import type { Command } from 'commander';
import { startDevnet, type Devnet } from '../../devnet/chain/index.js';
import type { DevnetOptions } from '../../devnet/chain/config.js';

interface DevnetFlags {
  port?: string;
  state?: string;
  blockTime?: string;
}

/** What `shardgate devnet` prints. Its keys are generated test keys of a local devnet: printing them is intended. */
export function describeDevnet(devnet: Devnet): string[] {
  const c = devnet.config;
  const lines = [
    `shardgate devnet listening on ${devnet.url} (chain id ${devnet.chainId})`,
    '',
    `NODE_RPC=${devnet.rpcUrl}`,
    `NODE_CHAIN_API=${devnet.url}`,
    `NODE_BASE=${devnet.url}`,
    `CHAIN_ID=${devnet.chainId}`,
    '',
    `blocks every ${c.blockTimeMs} ms, epochs of ${c.epochBlocks} blocks, PoC window ${c.pocBlocks} blocks; height ${devnet.chain.height}`,
    `min_amount ${c.minAmount} ngonka, token price ${c.tokenPrice} ngonka, models: ${devnet.chain.state.models.join(', ')}`,
    c.statePath ? `state file: ${c.statePath}` : 'state: in memory (set DEVNET_STATE to keep it)',
    '',
    'Funded test accounts (DEVNET TEST KEYS ONLY - generated or given for this local chain; never use them for real funds):',
  ];
  for (const k of devnet.creators) lines.push(`  creator (allowlisted)   ${k.address}  private key ${k.privateKeyHex}`);
  for (const a of devnet.creatorAddresses.filter((a) => !devnet.creators.some((k) => k.address === a))) {
    lines.push(`  creator (allowlisted)   ${a}  (given as an address)`);
  }
  lines.push(`  not allowlisted         ${devnet.notAllowlisted.address}  private key ${devnet.notAllowlisted.privateKeyHex}`);
  // Host keys are never printed, generated or given (DEVNET_HOST_KEYS): only addresses and URLs.
  lines.push('', 'Simulated hosts (slot i = host i):');
  for (const h of devnet.hosts) lines.push(`  host ${h.index}  ${h.address}  ${devnet.url}${h.prefix}${c.hostKeys[h.index] ? '  (key given)' : ''}`);
  if (devnet.externalHosts.length > 0) {
    lines.push('', 'External hosts (DEVNET_EXTERNAL_HOSTS; not run by the devnet):');
    devnet.externalHosts.forEach((h, i) => lines.push(`  slot ${devnet.hosts.length + i}  ${h.address}  ${h.url}`));
  }
  return lines;
}

export function registerDevnet(program: Command): void {
  program
    .command('devnet')
    .description('Run the embedded devnet: a simulated Cosmos chain (RPC + REST) with simulated inference hosts, on loopback')
    .option('--port <port>', 'listen port (DEVNET_PORT, default 26657; 0 = any free port)')
    .option('--state <file>', 'keep the chain state in this SQLite file (DEVNET_STATE)')
    .option('--block-time <ms>', 'block interval in ms (DEVNET_BLOCK_TIME_MS, default 1000)')
    .action(async (flags: DevnetFlags) => {
      const options: DevnetOptions = {};
      if (flags.port !== undefined) options.port = Number(flags.port);
      if (flags.state !== undefined) options.statePath = flags.state;
      if (flags.blockTime !== undefined) options.blockTimeMs = Number(flags.blockTime);
      const devnet = await startDevnet(options);
      process.stdout.write(`${describeDevnet(devnet).join('\n')}\n`);
      const stop = () => {
        void devnet.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      // The block timer is unref'd; keep the process alive until a signal.
      setInterval(() => undefined, 1 << 30);
    });
}
