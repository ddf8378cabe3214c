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
  // Protocol 2 (issue 23): json and jsonb values as a JSON string of their text, asked for with
  // the Sync-Protocol-Version header; capabilities gain min_protocol_version. With it, the
  // additive fields of protocol 1 above.
  // Additive (issue 24 item 4): a push-session create may carry the whole bundle (`rows`) and is
  // then answered as commit answers (`status: "committed"`), announced as `single_request_push`;
  // a `changed` notification may carry the bundle's pull page (`pull`) on a socket that named its
  // protocol in the upgrade.
  // Additive (issue 27): a snapshot create may ask for rows as arrays (`row_form`), announced as
  // `snapshot_row_arrays`; only then do its pages carry `tables` and rows as arrays.
  // Additive (issue 27): a snapshot create may ask for its first page in the answer
  // (`first_page_rows` → `first_page`), announced as `snapshot_first_page`.
  2: '9540d79f71eee2204591ff1a0a7acc8460e7b8f572ccb37f59bf430841d8a8b4',
};

describe('protocol version', () => {
  it('matches the recorded digest of the wire schemas', () => {
    expect(RECORDED[PROTOCOL_VERSION], `no digest recorded for protocol ${PROTOCOL_VERSION}`).toBeDefined();
    expect(protocolSchemaHash()).toBe(RECORDED[PROTOCOL_VERSION]);
  });
});
