/**
 * The protocol version. Policy: additive only. New optional fields and new endpoints keep the
 * version; anything that changes or removes a field bumps it. `protocol-version.test.ts` hashes
 * the wire schemas and fails until this number and the recorded hash change together.
 *
 * 2: json and jsonb values travel as a JSON string holding the value's text (docs/protocol.md
 * §4.2, §9). A client asks for it with the Sync-Protocol-Version header; without it, it is
 * answered in protocol 1's form (the value itself) until MIN_PROTOCOL_VERSION rises.
 */
export const PROTOCOL_VERSION = 2;

/** The oldest protocol a server of this build still serves (capabilities' `min_protocol_version`). */
export const MIN_PROTOCOL_VERSION = 1;

/** A protocol a client can speak to this build. */
export type ProtocolVersion = 1 | 2;

/**
 * The request header naming the protocol a client speaks (absent: 1), echoed on every /sync/*
 * answer with the protocol the answer is in.
 */
export const PROTOCOL_HEADER = 'sync-protocol-version';

/** The header every authenticated /sync/* request carries. */
export const SOURCE_ID_HEADER = 'sync-source-id';

/** 1–128 characters of [A-Za-z0-9._:-] (docs/protocol.md §2). */
export const SOURCE_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;
