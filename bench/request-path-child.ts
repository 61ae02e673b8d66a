/**
 * The request-path section in a process of its own (bench/run.ts forks it). In the bench's process
 * the earlier sections leave ~455 MB on the heap (store and projections benches); every
 * mark-compact then marks that too, and the fixed-rate rounds it lands in measured 28–46 ms p99
 * against 2–6 ms in a fresh process (docs/lab/benchmarks-notebook.md, session 5). A gateway in service shares
 * its heap with no benchmark, so the section runs apart. The soak runs in a second fresh process
 * for the same reason: its RSS figure is then the gateway's, not what the earlier phases left.
 */
import { tuneV8ForServing } from '../src/gateway/v8-tuning.js';
import { benchGateway, benchHostApart, benchSoak, type GatewayBenchOptions } from './gateway-bench.js';

// The gateway as `shardgate serve` runs it (the baseline shares the process, and so the setting).
tuneV8ForServing();
const opts = JSON.parse(process.argv[2] ?? '{}') as Omit<GatewayBenchOptions, 'log'>;
const log = (line: string) => console.log(`  ${line}`);
// `soak` as the second argument: the soak alone, in this fresh process (gateway-bench.ts, benchSoak);
// `host-apart`: the throughput pairs with the host in a process of its own (benchHostApart).
const part = process.argv[3];
const result =
  part === 'soak'
    ? await benchSoak({ requests: opts.soakRequests, log })
    : part === 'host-apart'
      ? await benchHostApart({ ...(opts.seconds !== undefined ? { seconds: opts.seconds } : {}), log })
      : await benchGateway({ ...opts, soak: false, log });
process.send!(result, undefined, {}, () => process.exit(0));
