import v8 from 'node:v8';

/**
 * The V8 setting a serving process runs with: `shardgate serve` calls this before the gateway
 * starts, and so does the bench's request-path process, which measures the gateway as served.
 *
 * `--no-allocation-site-pretenuring`. V8 makes objects of an allocation site straight in old space
 * once most of that site's recent objects were still alive at a scavenge, and takes the decision
 * back only after a mark-compact that keeps under 10% of old space (never, for a gateway). Under a
 * burst every in-flight request's objects are alive at some scavenge, so sites of short-lived
 * per-request objects (the parsed body, the normalized request, the auth result) were tenured:
 * their objects then died in old space. At 1,000 req/s that was about half of the old-space growth,
 * and the mark-compacts it caused (5–10 ms pauses plus incremental steps) set the fixed-rate p99.
 * With the flag those objects die in new space like the bare proxy's; measured in
 * docs/lab/benchmarks-notebook.md (session 6). V8 reads the flag at each scavenge's pretenuring decision, so
 * setting it at run time, before the load, takes effect.
 */
export function tuneV8ForServing(): void {
  v8.setFlagsFromString('--no-allocation-site-pretenuring');
}
