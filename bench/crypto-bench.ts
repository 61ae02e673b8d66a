/**
 * The protocol's cryptographic primitives alone, in µs per call (issue 31 (d)): every candidate
 * for the 65-byte recoverable secp256k1 signature the devshard protocol needs, side by side.
 *
 *   node dist/bench/crypto-bench.js [--ms N]
 *
 * libsecp256k1 is the library go-ethereum (and so gonka's hosts) sign and recover with; the
 * `secp256k1` package ships it prebuilt for linux-x64 and falls back to pure JS (elliptic) when the
 * addon cannot load, which this bench would show as a much slower row.
 *
 * Each figure is the median of 5 rounds of N ms (default 400); rounds of the candidates are
 * interleaved so machine noise hits them alike.
 */
import { createHash, createPrivateKey, createPublicKey, createSign, createVerify, randomBytes } from 'node:crypto';
import { Secp256k1 } from '@cosmjs/crypto';
import { secp256k1 } from '@noble/curves/secp256k1.js';
import { sha256 as nobleSha256 } from '@noble/hashes/sha2.js';
import libsecp256k1 from 'secp256k1';
import { canonicalPromptHash } from '../src/protocol/canonical-json.js';

export interface CryptoBenchRow {
  name: string;
  microseconds: number;
}

const args = process.argv.slice(2);
const msArg = args.indexOf('--ms');
const roundMs = msArg >= 0 ? Number(args[msArg + 1]) : 400;

function timeRound(fn: () => unknown, ms: number): number {
  let n = 0;
  const end = performance.now() + ms;
  const t0 = performance.now();
  while (performance.now() < end) {
    for (let i = 0; i < 8; i++) fn();
    n += 8;
  }
  return ((performance.now() - t0) * 1000) / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function benchCrypto(ms = roundMs): Promise<CryptoBenchRow[]> {
  const priv = randomBytes(32);
  const pub = secp256k1.getPublicKey(priv, false);
  const prompt = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(4000) }] }));
  const digest = createHash('sha256').update(prompt).digest();
  const noblePrecomputed = secp256k1.Point.BASE;
  noblePrecomputed.precompute(8);
  const jwk = (p: Uint8Array) => ({
    kty: 'EC' as const,
    crv: 'secp256k1',
    x: Buffer.from(p.subarray(1, 33)).toString('base64url'),
    y: Buffer.from(p.subarray(33, 65)).toString('base64url'),
  });
  const nodePriv = createPrivateKey({ key: { ...jwk(pub), d: priv.toString('base64url') }, format: 'jwk' });
  const nodePub = createPublicKey({ key: jwk(pub), format: 'jwk' });
  const recovered = secp256k1.sign(digest, priv, { prehash: false, format: 'recovered' });
  const compact = recovered.subarray(1);
  const nodeSig = createSign('sha256').update(prompt).sign({ key: nodePriv, dsaEncoding: 'ieee-p1363' });
  const cosmSig = Secp256k1.createSignature(digest, priv);
  const native = libsecp256k1.ecdsaSign(digest, priv);
  const cases: Array<[string, () => unknown]> = [
    ['sign recoverable (65 B), libsecp256k1 (secp256k1 package, native)', () => libsecp256k1.ecdsaSign(digest, priv)],
    ['verify, libsecp256k1 (native)', () => libsecp256k1.ecdsaVerify(native.signature, digest, pub)],
    ['recover public key, libsecp256k1 (native)', () => libsecp256k1.ecdsaRecover(native.signature, native.recid, digest, false)],
    ['sha256 of a 4 KB prompt, node:crypto', () => createHash('sha256').update(prompt).digest()],
    ['sha256 of a 4 KB prompt, @noble/hashes', () => nobleSha256(prompt)],
    // What a request pays for its MsgStartInference.prompt_hash: Go-canonical JSON, then sha256.
    ['prompt_hash of a 4 KB prompt (canonical JSON, then sha256; src/protocol/canonical-json.ts)', () => canonicalPromptHash(prompt)],
    ['sign recoverable (65 B), @noble/curves, precomputed base', () => secp256k1.sign(digest, priv, { prehash: false, format: 'recovered' })],
    ['sign 64 B r||s, node:crypto (OpenSSL), no recovery id', () => createSign('sha256').update(prompt).sign({ key: nodePriv, dsaEncoding: 'ieee-p1363' })],
    ['sign recoverable, @cosmjs/crypto', () => Secp256k1.createSignature(digest, priv)],
    ['verify, @noble/curves', () => secp256k1.verify(compact, digest, pub, { prehash: false })],
    ['verify, node:crypto (OpenSSL)', () => createVerify('sha256').update(prompt).verify({ key: nodePub, dsaEncoding: 'ieee-p1363' }, nodeSig)],
    ['recover public key, @noble/curves', () => secp256k1.recoverPublicKey(recovered, digest, { prehash: false })],
    ['recover public key, @cosmjs/crypto', () => Secp256k1.recoverPubkey(cosmSig, digest)],
  ];
  const rounds = new Map<string, number[]>(cases.map(([n]) => [n, []]));
  // Async cosmjs signing returns a promise; its work is synchronous inside, so timing the call is fair.
  for (let r = 0; r < 5; r++) for (const [name, fn] of cases) rounds.get(name)!.push(timeRound(fn, ms / 5));
  return cases.map(([name]) => ({ name, microseconds: median(rounds.get(name)!) }));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const rows = await benchCrypto();
  for (const r of rows) console.log(`${r.microseconds.toFixed(1).padStart(9)} µs  ${r.name}`);
}
