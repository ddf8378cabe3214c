/**
 * The pull pages push notifications bring (client-web/notified-pages.ts, protocol §5.9): a pull
 * uses one only when it is the page that pull would ask for (the one whole bundle after the
 * checkpoint, within a frozen ceiling), once; the newest is kept; an attachment change forgets it.
 */
import { describe, expect, it } from 'vitest';
import { NotifiedPages, type NotifiedPage } from '../client-web/notified-pages.js';

const page = (seq: number, options: { rowsOmitted?: boolean; bundles?: number } = {}): NotifiedPage => ({
  stable_bundle_seq: seq,
  has_more: false,
  bundles: Array.from({ length: options.bundles ?? 1 }, (_, i) => ({
    bundle_seq: seq + i,
    source_id: 'src-a',
    source_bundle_id: seq + i,
    row_count: 0,
    bundle_hash: 'h',
    rows_omitted: options.rowsOmitted ?? false,
    rows: [],
  })),
});

describe('notified pages', () => {
  it('hands over the page of the bundle after the checkpoint, once', () => {
    const pages = new NotifiedPages();
    pages.offer(page(5));
    expect(pages.take(3, undefined)).toBeNull();
    expect(pages.take(4, 6)).toBeNull();
    expect(pages.take(4, undefined)?.bundles[0]?.bundle_seq).toBe(5);
    expect(pages.take(4, undefined)).toBeNull();
  });

  it('keeps the newest page, and never one without its rows or of several bundles', () => {
    const pages = new NotifiedPages();
    pages.offer(page(6));
    pages.offer(page(5));
    expect(pages.take(4, undefined)).toBeNull();
    expect(pages.take(5, 6)?.bundles[0]?.bundle_seq).toBe(6);
    pages.offer(page(7, { rowsOmitted: true }));
    expect(pages.take(6, undefined)).toBeNull();
    pages.offer(page(8, { bundles: 2 }));
    expect(pages.take(7, undefined)).toBeNull();
  });

  it('forgets what came in when cleared (the attachment changed)', () => {
    const pages = new NotifiedPages();
    pages.offer(page(1));
    pages.clear();
    expect(pages.take(0, undefined)).toBeNull();
  });
});
