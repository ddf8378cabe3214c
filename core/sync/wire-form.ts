/**
 * Which json form a request's rows travel in (docs/protocol.md §4.2, §9). Protocol 2 sends json
 * and jsonb values as a JSON string of their text; protocol 1 as the value itself. The server
 * stores one form (protocol 2's) and derives protocol 1's on the way out, in the managed functions
 * of layout 16 on, which take the form as their last argument. Before that layout (a build serving
 * a database bootstrap has not upgraded yet) only protocol 1 exists and the functions have no such
 * argument.
 */
import { sql, type SqlFragment } from '../db/index.js';
import { type ProtocolVersion } from '../protocol/version.js';
import { type RowForm } from '../protocol/read-path.js';
import { type Actor, type SyncContext } from './context.js';

/** The layout whose managed functions serve protocol 2 (migration 0014). */
export const JSON_TEXT_LAYOUT = 16;

/** The newest protocol a server on `layoutVersion` serves. */
export function servedProtocol(layoutVersion: number): ProtocolVersion {
  return layoutVersion >= JSON_TEXT_LAYOUT ? 2 : 1;
}

/** The protocol the actor's rows travel in (the edge refused one the layout cannot serve). */
export function protocolOf(actor: Actor): ProtocolVersion {
  return actor.protocol ?? 1;
}

/**
 * The form argument of a managed function that takes one (`, 2::smallint`), or nothing on a
 * layout before protocol 2, whose functions have no such parameter.
 */
export function formArgument(ctx: SyncContext, actor: Actor): SqlFragment {
  return ctx.catalog.layoutVersion >= JSON_TEXT_LAYOUT ? sql`, ${protocolOf(actor)}::smallint` : sql``;
}

/** The layout whose snapshots may hold rows as arrays (migration 0026). */
export const ROW_ARRAYS_LAYOUT = 26;

/**
 * The form argument of a snapshot function: 3, rows as arrays in protocol 2's json form, where
 * the request asked for arrays and the layout and the protocol serve them; else the json form
 * (formArgument). A protocol 1 client is answered objects: arrays carry protocol 2's values.
 */
export function snapshotFormArgument(ctx: SyncContext, actor: Actor, rowForm: RowForm | undefined): SqlFragment {
  if (rowForm === 'arrays' && ctx.catalog.layoutVersion >= ROW_ARRAYS_LAYOUT && protocolOf(actor) === 2) return sql`, 3::smallint`;
  return formArgument(ctx, actor);
}

/**
 * A bundle summary (commit, already committed) as `protocol` answers it: `bundle_hash` is over
 * the rows in that protocol's form. The managed functions give protocol 1's as `bundle_hash` and
 * protocol 2's as `bundle_hash_v2` when they differ; the wire carries only the one.
 */
export function summaryInProtocol<T extends object>(answer: T, protocol: ProtocolVersion): T {
  const { bundle_hash_v2: v2, ...rest } = answer as T & { bundle_hash_v2?: unknown };
  if (protocol === 2 && typeof v2 === 'string') return { ...rest, bundle_hash: v2 } as T;
  return rest as T;
}
