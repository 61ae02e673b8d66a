/**
 * The version table (src/protocol/versions.ts): how an escrow's protocol is chosen from a body,
 * the gateway's settings and the chain's approved versions, and what is refused. Route forms and
 * the refusal text follow devshardctl (Z5 devshard/paths.go ResolveRoutePrefix:
 * `unsupported devshard route prefix %q`; types/domain.go ParseProtocolVersion strips v/V).
 */
import { describe, expect, it } from 'vitest';
import { chooseProtocol, LEGACY_PROTOCOL, newestApproved, parseProtocolVersion, PROTOCOL_VERSIONS, rulesOf, versionOfRoute, VersionError } from '../../src/protocol/versions.js';

const none = { approved: [] as string[] };

describe('the version table', () => {
  it('reads versions as devshardctl writes them, and refuses what we do not speak', () => {
    expect(parseProtocolVersion('4.1')).toBe('v4.1');
    expect(parseProtocolVersion('V4.1')).toBe('v4.1');
    expect(parseProtocolVersion(' v3 ')).toBe('v3');
    // devshardctl's v2-era registry stamp "1" named the protocol our v2 is (8a35022 types/domain.go).
    expect(parseProtocolVersion('1')).toBe('v2');
    expect(() => parseProtocolVersion('v9')).toThrow(/not one this gateway speaks \(v2, v3, v4, v4\.1, v5\)/);
    expect(() => parseProtocolVersion('latest')).toThrow(VersionError);
  });

  it('maps routes to versions with ResolveRoutePrefix\'s words for anything else', () => {
    expect(versionOfRoute('/devshard/v4.1')).toBe('v4.1');
    expect(versionOfRoute('/devshard/v3/')).toBe('v3');
    expect(versionOfRoute('/v1/devshard')).toBe('v2');
    expect(versionOfRoute('/devshard/v9')).toBeUndefined();
    expect(() => versionOfRoute('/api/devshard/v3')).toThrow('unsupported devshard route prefix "/api/devshard/v3"');
    expect(() => versionOfRoute('/devshard')).toThrow(/unsupported devshard route prefix/);
  });

  it('chooses the body, then the settings, then the newest the chain approves', () => {
    expect(chooseProtocol({}, none)).toEqual({ version: 'v4.1', route: '/devshard/v4.1', tag: 'v4.1' });
    expect(chooseProtocol({}, { approved: ['v2', 'v3'] })).toEqual({ version: 'v3', route: '/devshard/v3', tag: 'v3' });
    expect(chooseProtocol({}, { version: 'v2', approved: [] })).toEqual(LEGACY_PROTOCOL);
    expect(chooseProtocol({ version: '4' }, { version: 'v2', approved: [] })).toEqual({ version: 'v4', route: '/devshard/v4', tag: 'v4' });
    // The route implies the version; the tag is set apart (hosts of the v3 line stamp "v2").
    expect(chooseProtocol({ route: '/devshard/v3', tag: 'v2' }, none)).toEqual({ version: 'v3', route: '/devshard/v3', tag: 'v2' });
    expect(chooseProtocol({}, { route: '/devshard/v3', tag: 'v2', approved: [] })).toEqual({ version: 'v3', route: '/devshard/v3', tag: 'v2' });
  });

  it('refuses a route and a version that do not fit, and a chain that approves none we speak', () => {
    expect(() => chooseProtocol({ version: 'v4.1', route: '/v1/devshard' }, none)).toThrow('route prefix "/v1/devshard" serves v2, not the escrow\'s protocol version v4.1');
    expect(() => chooseProtocol({ route: '/devshard/v7' }, none)).toThrow(/names a version this gateway does not speak/);
    expect(() => newestApproved(['v6', 'v7'])).toThrow('the chain approves v6, v7, and this gateway speaks none of them (v2, v3, v4, v4.1, v5)');
    // v5 is spoken when an escrow names it, never chosen by default (until its heartbeats and error-miss are ours).
    expect(() => newestApproved(['v5', 'v6'])).toThrow('the chain approves v5, v6; of them this gateway speaks v5 only when an escrow names it: set protocol_version (POST /v1/admin/escrows) or DEVSHARD_PROTOCOL_VERSION');
    expect(newestApproved(['v4.1', 'v5'])).toBe('v4.1');
    expect(chooseProtocol({ version: 'v5' }, none)).toEqual({ version: 'v5', route: '/devshard/v5', tag: 'v5' });
    expect(chooseProtocol({ route: '/devshard/v5' }, none)).toEqual({ version: 'v5', route: '/devshard/v5', tag: 'v5' });
  });

  it('gives every version a rule set, and v2\'s rules to v3, v4 and v4.1', () => {
    expect(PROTOCOL_VERSIONS.map((v) => [v.name, rulesOf({ version: v.name })])).toEqual([
      ['v2', 'v2'],
      ['v3', 'v2'],
      ['v4', 'v2'],
      ['v4.1', 'v2'],
      ['v5', 'v5'],
    ]);
    expect(() => rulesOf({ version: 'v9' })).toThrow(VersionError);
  });
});
