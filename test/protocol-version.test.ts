/**
 * Fails whenever a wire schema changes, until PROTOCOL_VERSION and the recorded digest change
 * together. Policy (core/protocol/version.ts): additive changes keep the version, anything else
 * bumps it; either way the digest below is updated on purpose, in the same commit.
 */
import { describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../core/protocol/index.js';
import { protocolSchemaHash } from './support/protocol-hash.js';

const RECORDED: Record<number, string> = {
  // Additive: Conflict.server_row_omitted and ErrorBody.detail_count (issue 25 item 1, budgeted answers).
  1: '24883c0a45546f0155a81bbe67f93e25bf1b895ec9bb85a58fbd7f2747342127',
};

describe('protocol version', () => {
  it('matches the recorded digest of the wire schemas', () => {
    expect(RECORDED[PROTOCOL_VERSION], `no digest recorded for protocol ${PROTOCOL_VERSION}`).toBeDefined();
    expect(protocolSchemaHash()).toBe(RECORDED[PROTOCOL_VERSION]);
  });
});
