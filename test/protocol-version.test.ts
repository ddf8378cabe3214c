/**
 * Fails whenever a wire schema changes, until PROTOCOL_VERSION and the recorded digest change
 * together. Policy (core/protocol/version.ts): additive changes keep the version, anything else
 * bumps it; either way the digest below is updated on purpose, in the same commit.
 */
import { describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../core/protocol/index.js';
import { protocolSchemaHash } from './support/protocol-hash.js';

const RECORDED: Record<number, string> = {
  1: '7ab963d241594b2af95f9a94e37c8db8d608c644f10ffb4cab452618be7690f2',
  // Protocol 2 (issue 23): json and jsonb values as a JSON string of their text, asked for with
  // the Sync-Protocol-Version header; capabilities gain min_protocol_version.
  2: '99889ef19c2c07cf6b8068f05762604ca66db79736c365a24056f90e6bde6306',
};

describe('protocol version', () => {
  it('matches the recorded digest of the wire schemas', () => {
    expect(RECORDED[PROTOCOL_VERSION], `no digest recorded for protocol ${PROTOCOL_VERSION}`).toBeDefined();
    expect(protocolSchemaHash()).toBe(RECORDED[PROTOCOL_VERSION]);
  });
});
