/**
 * Pull pages that came with push notifications (protocol §5.9): the socket hands over the page of
 * the bundle the server just announced, and the next pull takes it instead of asking the server,
 * when it is exactly the page the device would ask for (the one bundle after its checkpoint). Only
 * the newest page is kept; one that does not fit the checkpoint is simply not used, and the pull
 * asks the server as before.
 */
import { type PullAnswer } from './wire.js';
import type * as z from 'zod/mini';

export type NotifiedPage = z.infer<typeof PullAnswer>;

export class NotifiedPages {
  private page: NotifiedPage | null = null;

  /** A page a socket received; kept when it is the newest. */
  offer(page: NotifiedPage): void {
    const seq = page.bundles[0]?.bundle_seq ?? 0;
    if (!this.page || seq > (this.page.bundles[0]?.bundle_seq ?? 0)) this.page = page;
  }

  /**
   * The page of bundle `checkpoint + 1`, used once, when the pull would stop there anyway (no
   * ceiling frozen yet, or that bundle is it); null otherwise.
   */
  take(checkpoint: number, target: number | undefined): NotifiedPage | null {
    const page = this.page;
    const bundle = page?.bundles[0];
    if (!page || !bundle || page.bundles.length !== 1 || bundle.rows_omitted || bundle.bundle_seq !== checkpoint + 1) return null;
    if (target !== undefined && target !== bundle.bundle_seq) return null;
    this.page = null;
    return page;
  }

  /** Forgets what came in (the device attached or detached: the socket was another user's). */
  clear(): void {
    this.page = null;
  }
}
