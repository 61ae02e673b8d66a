/**
 * The request-path section in a process of its own (bench/run.ts forks it). In the bench's process
 * the earlier sections leave ~455 MB on the heap (store and projections benches); every
 * mark-compact then marks that too, and the fixed-rate rounds it lands in measured 28–46 ms p99
 * against 2–6 ms in a fresh process (docs/benchmarks.md, session 5). A gateway in service shares
 * its heap with no benchmark, so the section runs apart.
 */
import { tuneV8ForServing } from '../src/gateway/v8-tuning.js';
import { benchGateway, type GatewayBenchOptions } from './gateway-bench.js';

// The gateway as `shardgate serve` runs it (the baseline shares the process, and so the setting).
tuneV8ForServing();
const opts = JSON.parse(process.argv[2] ?? '{}') as Omit<GatewayBenchOptions, 'log'>;
const result = await benchGateway({ ...opts, log: (line) => console.log(`  ${line}`) });
process.send!(result, undefined, {}, () => process.exit(0));
