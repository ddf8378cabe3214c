/**
 * The web client's check of snapshot pages (client-web/wire.ts): a page of objects and a page of
 * row arrays (protocol §5.6) both parse; an array naming a table its page does not describe, one
 * without an integer row version, or object rows under `tables` are refused before any is applied.
 */
import { describe, expect, it } from 'vitest';
import { SnapshotAnswer } from '../client-web/wire.js';

const envelope = { snapshot_id: '0d000000-0000-4000-8000-000000000001', snapshot_bundle_seq: 3, row_count: 2, next_row_ordinal: 2, has_more: false };
const tables = { 7: { schema: 'app', table: 'lists', columns: ['id', 'title'] } };
const object = { schema: 'app', table: 'lists', key: { id: 'a' }, row_version: 2, payload: { id: 'a', title: 't' } };

describe('snapshot pages at the client', () => {
  it('reads a page of objects and a page of arrays', () => {
    expect(SnapshotAnswer.safeParse({ ...envelope, rows: [object, object] }).success).toBe(true);
    expect(SnapshotAnswer.safeParse({ ...envelope, tables, rows: [[7, 2, 'a', 't'], [7, 3, 'b', null]] }).success).toBe(true);
  });

  it('refuses arrays that name an unknown table or lack a row version, and objects under tables', () => {
    for (const rows of [[[8, 2, 'a', 't']], [[7, '2', 'a', 't']], [[7]], [object], [{ 0: 7, 1: 2 }]]) {
      expect(SnapshotAnswer.safeParse({ ...envelope, tables, rows }).success, JSON.stringify(rows)).toBe(false);
    }
    expect(SnapshotAnswer.safeParse({ ...envelope, rows: [[7, 2, 'a', 't']] }).success).toBe(false);
    expect(SnapshotAnswer.safeParse({ ...envelope, tables: { 7: { schema: 'app', table: 'lists' } }, rows: [[7, 2, 'a']] }).success).toBe(false);
  });
});
