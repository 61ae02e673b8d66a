/**
 * The import rules of shardgate (docs/architecture.md, "Layers"). test/architecture/layers.test.ts
 * runs dependency-cruiser with this file over src/ and bench/ and fails on any violation; by hand:
 *   npx depcruise src bench --config .dependency-cruiser.cjs
 *
 * Layers, top to bottom; an arrow may point only to the same or a lower layer:
 *   cli -> main -> console -> http -> gateway -> projections -> machines -> events
 * The edge sits beside the gateway: gateway (and what stands above it) may use network, chain
 * and protocol; network and chain stand on protocol; protocol is pure and stands on nothing.
 * devnet (the network's twin) stands on protocol, chain and network, and only cli, main, tests
 * and benchmarks may use it. config is a leaf every layer may use (it reads the pure version table of protocol).
 */

/** Folders of src/ each layer may import, besides its own folder and config. */
const MAY_IMPORT = {
  cli: ['main', 'console', 'http', 'gateway', 'projections', 'machines', 'events', 'network', 'chain', 'protocol', 'devnet'],
  main: ['console', 'http', 'gateway', 'projections', 'machines', 'events', 'network', 'chain', 'protocol', 'devnet'],
  // The operator console (issue 43): its page and the admin reads it makes, beside the routes,
  // registered by the composition root; it stands on http (auth, errors) and the read side.
  console: ['http', 'gateway', 'projections', 'machines', 'events', 'network', 'chain', 'protocol'],
  // The edge is below the gateway, so below http too: http uses network's cancellation and token
  // estimate (call-signal.ts, tokens.ts) and chunk types to stream an answer.
  http: ['gateway', 'projections', 'machines', 'events', 'network', 'chain', 'protocol'],
  gateway: ['projections', 'machines', 'events', 'network', 'chain', 'protocol'],
  projections: ['machines', 'events'],
  machines: ['events'],
  events: [],
  network: ['protocol'],
  chain: ['protocol'],
  protocol: [],
  devnet: ['protocol', 'chain', 'network'],
  // The version table (src/protocol/versions.ts) checks DEVSHARD_PROTOCOL_VERSION and
  // DEVSHARD_ROUTE_PREFIX at load: pure data, and protocol may not import config, so no circle.
  config: ['protocol'],
};

/** Layers that may not even use config (pure). */
const NO_CONFIG = new Set(['protocol']);

/**
 * Justified exceptions: type-only imports (erased at build, no load-time arrow), each kept to
 * the one file that needs it. A value import of the same file is still refused (rule below).
 */
const TYPE_ONLY_EXCEPTIONS = [
  {
    // The log records a failed chain transaction with the chain port's own failure kinds
    // (ChainErrorKind, events/catalog/common.ts). Defining the list twice would let the recorded
    // kinds drift from the ones the chain client produces; chain/port.ts is being rewritten
    // (issue 27), so the type stays there for now.
    from: 'events',
    file: 'src/chain/port.ts',
  },
  {
    // collect-signatures.ts gathers the hosts' settlement signatures into the chain's settlement
    // message shapes (HostStat, SlotSignature of chain/port.ts). These are devshard protocol
    // shapes and move to src/protocol with the protocol replica (in flight in another branch);
    // until then network names them, type-only.
    from: 'network',
    file: 'src/chain/port.ts',
  },
];

function exceptionsFrom(layer) {
  return TYPE_ONLY_EXCEPTIONS.filter((e) => e.from === layer).map((e) => `^${e.file.replace(/\./g, '\\.')}$`);
}

const layerRules = Object.entries(MAY_IMPORT).map(([layer, allowed]) => {
  const folders = [layer, ...allowed, ...(NO_CONFIG.has(layer) ? [] : ['config'])];
  return {
    name: `layer-${layer}`,
    comment: `src/${layer} may import only ${folders.map((f) => `src/${f}`).join(', ')} (an arrow up a layer or across the edge).`,
    severity: 'error',
    from: { path: `^src/${layer}/` },
    to: {
      path: '^src/',
      pathNot: [`^src/(${folders.join('|')})/`, ...exceptionsFrom(layer)],
    },
  };
});

const typeOnlyRules = TYPE_ONLY_EXCEPTIONS.map((e) => ({
  name: `type-only-${e.from}-to-${e.file.replace(/^src\//, '').replace(/[/.]/g, '-')}`,
  comment: `src/${e.from} may import ${e.file} for types only (see TYPE_ONLY_EXCEPTIONS).`,
  severity: 'error',
  from: { path: `^src/${e.from}/` },
  to: { path: `^${e.file.replace(/\./g, '\\.')}$`, dependencyTypesNot: ['type-only'] },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'An import circle: the modules cannot be understood (or loaded) one after the other.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...layerRules,
    ...typeOnlyRules,
    {
      name: 'devnet-only-from-the-top',
      comment: 'The devnet is the network\'s twin: only src/cli, src/main, tests and benchmarks start it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(cli|main|devnet)/' },
      to: { path: '^src/devnet/' },
    },
    {
      name: 'protocol-is-pure',
      comment: 'src/protocol does no I/O: no file system, sockets, HTTP or child processes.',
      severity: 'error',
      from: { path: '^src/protocol/' },
      to: { dependencyTypes: ['core'], path: '^(node:)?(fs|fs/promises|net|http|https|http2|child_process|dgram|tls|worker_threads)$' },
    },
    {
      name: 'src-not-from-tests-or-benchmarks',
      comment: 'Product code never imports tests or benchmarks.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'known-folders-only',
      comment: 'Every folder of src/ has a place in the layers: a new one gets a rule here first.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^src/', pathNot: `^src/(${Object.keys(MAY_IMPORT).join('|')})/` },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a type cycle is still a cycle for a reader.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^dist/' },
  },
};
