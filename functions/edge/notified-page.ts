/**
 * The pull page a commit's notification carries (protocol §5.9): after a push commits, the user's
 * sockets that named their protocol get the bundle's rows with the notification, so a device at
 * checkpoint n-1 applies bundle n without a pull round trip. Read lazily (only when a socket asks),
 * once per protocol, through the runtime's pool after the request answered; with a page budget of
 * `notify_page_bytes_max`, and only a page of exactly that one whole bundle is sent (a larger one
 * comes `rows_omitted`, and the device pulls as before).
 */
import { pull, rawText } from '../../core/sync/index.js';
import { type PageLoader } from '../../core/sync/notify/commit-feed.js';
import { type Actor, type SyncContext } from '../../core/sync/context.js';
import { servedProtocol } from '../../core/sync/wire-form.js';
import { type ProtocolVersion } from '../../core/protocol/version.js';
import { type Runtime } from './runtime.js';

/** The loader of bundle `bundleSeq`'s page, read as `actor` (the device that committed it). */
export function notifiedPage(runtime: Runtime, actor: Actor, bundleSeq: number): PageLoader {
  const read = new Map<ProtocolVersion, Promise<string | null>>();
  return (protocol) => {
    let page = read.get(protocol);
    if (!page) {
      page = readPage(runtime, { ...actor, protocol }, bundleSeq).catch(() => null);
      read.set(protocol, page);
    }
    return page;
  };
}

async function readPage(runtime: Runtime, actor: Actor & { protocol: ProtocolVersion }, bundleSeq: number): Promise<string | null> {
  const base = runtime.config.limits;
  const catalog = await runtime.catalog();
  // A protocol this layout does not serve yet gets no page (the device pulls and is told so there).
  if (servedProtocol(catalog.layoutVersion) < actor.protocol) return null;
  const ctx: SyncContext = { db: runtime.db, limits: { ...base, maxResponseBytes: base.notifyPageBytesMax }, catalog, pending: runtime.pending };
  const rawJson = rawText(await pull(ctx, actor, { afterBundleSeq: bundleSeq - 1, maxBundles: 1, targetBundleSeq: bundleSeq }));
  if (Buffer.byteLength(rawJson) > base.notifyPageBytesMax) return null;
  const page = JSON.parse(rawJson) as { bundles?: Array<{ bundle_seq?: unknown; rows_omitted?: unknown }> };
  const bundles = page.bundles ?? [];
  const whole = bundles.length === 1 && bundles[0]?.bundle_seq === bundleSeq && bundles[0]?.rows_omitted === false;
  return whole ? rawJson : null;
}
