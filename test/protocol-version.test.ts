/**
 * Fails whenever a wire schema changes, until PROTOCOL_VERSION and the recorded digest change
 * together. Policy (core/protocol/version.ts): additive changes keep the version, anything else
 * bumps it; either way the digest below is updated on purpose, in the same commit.
 */
import { describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../core/protocol/index.js';
import { protocolSchemaHash } from './support/protocol-hash.js';

const RECORDED: Record<number, string> = {
  // Additive: Conflict.server_row_omitted, ErrorBody.detail_count (issue 25 item 1, budgeted answers)
  // and PingMessage.latest_bundle_seq (issue 25 item 4, pings answered when the device is behind).
  1: 'd2737bfa470e3174e2146e1555ccd57ddddc15ff645a58615d046659492584a6',
};

describe('protocol version', () => {
  it('matches the recorded digest of the wire schemas', () => {
    expect(RECORDED[PROTOCOL_VERSION], `no digest recorded for protocol ${PROTOCOL_VERSION}`).toBeDefined();
    expect(protocolSchemaHash()).toBe(RECORDED[PROTOCOL_VERSION]);
  });
});
