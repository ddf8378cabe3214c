/**
 * Push notifications (protocol §5.9): what the server sends on `GET /sync/ws` (a WebSocket locally,
 * an API Gateway WebSocket API in AWS) after each commit of the connection's user, and what a
 * client may send. Clients authenticate the upgrade with `?token=<JWT>&source_id=<source>`,
 * because browsers cannot set headers on a WebSocket.
 */
import * as z from 'zod/mini';
import './zod.js';
import { PullResponse } from './read-path.js';

const count = z.int().check(z.nonnegative());

/**
 * After each commit of the user: the latest bundle_seq; the device pulls when it is behind. On a
 * socket that named its protocol (`protocol` in the upgrade), a commit the server announces
 * itself may come with `pull`: the pull page of that one bundle, exactly what `GET /sync/pull?
 * after_bundle_seq=n-1&target_bundle_seq=n` answers in that protocol, when it is small and whole
 * (`notify_page_bytes_max`), so a device whose checkpoint is n-1 applies it without a pull.
 */
export const ChangedMessage = z.object({ type: z.literal('changed'), latest_bundle_seq: count, pull: z.optional(PullResponse) });
export type ChangedMessage = z.infer<typeof ChangedMessage>;

/**
 * A keepalive the client sends now and then: API Gateway closes a WebSocket after 10 minutes
 * without a message. It carries the highest `latest_bundle_seq` the device has heard of; when the
 * user's latest is past it (a notification that never arrived: the management API refused it,
 * timed out), the server answers with a `changed` message, so a device learns of a commit within
 * one ping interval however its notification failed. Without the field the server answers with
 * the latest every time (AWS; the local gateway, whose notifications come from the commit feed,
 * answers nothing).
 */
export const PingMessage = z.object({ type: z.literal('ping'), latest_bundle_seq: z.optional(count) });
export type PingMessage = z.infer<typeof PingMessage>;

/** Query parameters of the upgrade request. */
export const WS_TOKEN_PARAM = 'token';
export const WS_SOURCE_PARAM = 'source_id';
/** The protocol (1 or 2) the socket's `pull` pages are rendered in; absent, none are sent. */
export const WS_PROTOCOL_PARAM = 'protocol';
/** The path of the WebSocket on the local gateway (in AWS the WebSocket API has its own URL). */
export const WS_PATH = '/sync/ws';
