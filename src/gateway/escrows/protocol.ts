/**
 * Which devshard protocol an escrow speaks: chosen when it is created, registered or imported
 * (src/protocol/versions.ts `chooseProtocol`, from the body, the gateway's settings and the chain's
 * approved versions), recorded in its first event (EscrowCreated / EscrowImported `protocol`), and
 * read back from there. An escrow recorded before versions were recorded speaks v2 on the legacy
 * route, so replay and verify of an older log stay exact.
 */
import { escrowStream, type ProtocolData } from '../../events/catalog.js';
import { chooseProtocol, LEGACY_PROTOCOL, VersionError, type EscrowProtocol, type ProtocolChoice } from '../../protocol/versions.js';
import type { Engine } from '../write/engine.js';
import { refuse } from '../errors.js';
import type { GatewayContext } from '../context.js';

/** Per engine, escrow id → its recorded protocol (an escrow's first event never changes). */
const known = new WeakMap<Engine, Map<string, EscrowProtocol>>();

/** The engine's memo, following its commits from its creation on (new and imported escrows). */
function memo(engine: Engine): Map<string, EscrowProtocol> {
  const m = known.get(engine);
  if (m) return m;
  const fresh = new Map<string, EscrowProtocol>();
  known.set(engine, fresh);
  engine.store.onCommit((records) => {
    for (const r of records) if (r.streamVersion === 0) remember(fresh, r);
  });
  return fresh;
}

function remember(m: Map<string, EscrowProtocol>, first: { streamId: string; type: string; data: unknown }): void {
  if (first.type !== 'EscrowCreated' && first.type !== 'EscrowImported') return;
  const d = first.data as { escrowId?: string; protocol?: EscrowProtocol };
  if (typeof d.escrowId !== 'string' || escrowStream(d.escrowId) !== first.streamId) return;
  m.set(d.escrowId, d.protocol ? { version: d.protocol.version, route: d.protocol.route, tag: d.protocol.tag } : LEGACY_PROTOCOL);
}

/**
 * Reads the recorded protocol of each escrow once (at start, before serving), so that
 * `escrowProtocol` answers from memory on the chat path whatever the store.
 */
export async function loadRecordedProtocols(engine: Engine, escrowIds: Iterable<string>): Promise<void> {
  const m = memo(engine);
  for (const id of escrowIds) {
    if (m.has(id)) continue;
    const [first] = await engine.store.readStream(escrowStream(id), 0, 1);
    if (first) remember(m, first);
  }
}

/**
 * The protocol recorded by an escrow's first event; v2 on the legacy route when it recorded none
 * (or is not recorded yet). From memory; a store with local reads is asked on a miss.
 */
export function escrowProtocol(engine: Engine, escrowId: string): EscrowProtocol {
  const m = memo(engine);
  const hit = m.get(escrowId);
  if (hit) return hit;
  const read = engine.store.readStream(escrowStream(escrowId), 0, 1);
  if (read instanceof Promise) {
    read.catch(() => undefined); // a network store: loadRecordedProtocols read it at start
    return LEGACY_PROTOCOL;
  }
  if (read[0]) remember(m, read[0]);
  return m.get(escrowId) ?? LEGACY_PROTOCOL; // not yet recorded: not cached
}

/** The body members that name a protocol (devshardctl's `protocol_version`, `route_prefix`; our `state_root_version`). */
export interface ProtocolBody {
  protocol_version?: string;
  route_prefix?: string;
  state_root_version?: string;
}

export const protocolChoiceOf = (b: ProtocolBody): ProtocolChoice => ({
  ...(b.protocol_version?.trim() ? { version: b.protocol_version } : {}),
  ...(b.route_prefix?.trim() ? { route: b.route_prefix } : {}),
  ...(b.state_root_version?.trim() ? { tag: b.state_root_version } : {}),
});

/**
 * The protocol a new escrow will speak: the body's choice, else the gateway's settings, else the
 * newest version we speak that the chain approves. A 400 naming the member when they do not fit;
 * a version or tag the chain does not list is refused here too (`approvalRefusal`), before any fee.
 */
export function chooseEscrowProtocol(ctx: Pick<GatewayContext, 'config'>, choice: ProtocolChoice, approved: readonly string[]): EscrowProtocol {
  const d = ctx.config.network.protocol;
  try {
    return chooseProtocol(choice, { version: d.version, route: d.routePrefix, tag: d.stateRootVersion, approved });
  } catch (err) {
    if (!(err instanceof VersionError)) throw err;
    const param = choice.route !== undefined && /route/.test(err.message) ? 'route_prefix' : choice.version !== undefined ? 'protocol_version' : choice.route !== undefined ? 'route_prefix' : null;
    const where = param ? '' : ' (from DEVSHARD_PROTOCOL_VERSION / DEVSHARD_ROUTE_PREFIX and the chain\'s approved versions)';
    throw refuse.invalid(`${err.message}${where}.`, param, 'unsupported_protocol_version');
  }
}

/** The event data of a protocol (a copy: the recorded object is never shared). */
export const protocolData = (p: EscrowProtocol): ProtocolData => ({ version: p.version, route: p.route, tag: p.tag });

/** Whether `p` is what an escrow without a recorded protocol speaks (then nothing new is recorded). */
export const isLegacyProtocol = (p: EscrowProtocol): boolean => p.version === LEGACY_PROTOCOL.version && p.route === LEGACY_PROTOCOL.route && p.tag === LEGACY_PROTOCOL.tag;
