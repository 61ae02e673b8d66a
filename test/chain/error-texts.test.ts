/** The chain's error texts (gonka 8a35022 keeper, t/errors.go) map to the gateway's kinds by text and registered code. */
import { describe, expect, it } from 'vitest';
import { DEVSHARD_TEXT, kindOfFailure } from '../../src/chain/devshard-errors.js';

const wrap = (text: string) => `failed to execute message; message index: 0: ${text}`;

describe('chain error mapping', () => {
  it.each([
    ['escrow amount 5 out of range [5000000000, 10000000000]', 'amount_out_of_range'],
    ['epoch 12 already has 100 escrows (max 100)', 'epoch_limit'],
    ['insufficient quorum: 3 slot votes, need 11', 'bad_signatures'],
    ['state_root mismatch', 'bad_signatures'],
    ['nonce 20001 exceeds maximum 20000', 'nonce_too_high'],
    ['settler gonka1a is not the escrow creator gonka1b', 'wrong_settler'],
    ['escrow 7 already settled', 'already_settled'],
    // Chain v0.2.16 (zpoken/gonka@ef1a5efd k/devshard_settlement.go validateDevshardSettlementVersionApproved), then the older chains' text.
    ['settlement version "v4.1" is not listed in approved devshard versions', 'version_not_approved'],
    ['settlement version "v2" is not listed in devshard_escrow_params.approved_versions', 'version_not_approved'],
    ['devshard settlement only supports current or previous epoch: current epoch 9, escrow epoch 7', 'wrong_epoch'],
    ['escrow 7 not found', 'not_found'],
    ['total debit 11 (cost 10 + fees 1) exceeds escrow amount 10', 'overspent'],
  ])('plain text (undefined/1): %s → %s', (text, kind) => {
    expect(kindOfFailure(1, 'undefined', wrap(text))).toBe(kind);
  });

  it('the keeper\'s approved-versions refusal, as v0.2.16 formats it (%q)', () => {
    expect(DEVSHARD_TEXT.versionNotApproved('v4.1')).toBe('settlement version "v4.1" is not listed in approved devshard versions');
    expect(DEVSHARD_TEXT.versionNotApprovedInParams('v2')).toBe('settlement version "v2" is not listed in devshard_escrow_params.approved_versions');
  });

  it('reads the registered allowlist refusal by code, and never reads 1101–1112 as devshard failures', () => {
    expect(kindOfFailure(1173, 'inference', wrap('address is not allowed to create devshard escrows for devshards'))).toBe('not_allowlisted');
    for (let code = 1101; code <= 1112; code++) expect(kindOfFailure(code, 'inference', wrap('participant not found'))).toBe('rejected');
  });

  it('maps the SDK codes the node answers with', () => {
    expect(kindOfFailure(5, 'sdk', wrap('failed to lock funds: spendable balance 1ngonka is smaller than 2ngonka: insufficient funds'))).toBe('insufficient_funds');
    expect(kindOfFailure(32, 'sdk', 'account sequence mismatch, expected 3, got 2: incorrect account sequence')).toBe('bad_sequence');
    expect(kindOfFailure(18, 'sdk', 'unordered transaction has a timeout_timestamp that has already passed: invalid request')).toBe('bad_sequence');
  });
});
