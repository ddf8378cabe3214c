/**
 * The protocol version. Policy: additive only. New optional fields and new endpoints keep the
 * version; anything that changes or removes a field bumps it. `protocol-version.test.ts` hashes
 * the wire schemas and fails until this number and the recorded hash change together.
 */
export const PROTOCOL_VERSION = 1;

/** The header every authenticated /sync/* request carries. */
export const SOURCE_ID_HEADER = 'sync-source-id';

/** 1–128 characters of [A-Za-z0-9._:-] (docs/protocol.md §2). */
export const SOURCE_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
