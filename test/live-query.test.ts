/**
 * Issue 24 item 1: the row identity of live queries, on its own. A row whose values are equal
 * (types included) is the previous object; duplicates are matched one to one; a result with
 * nothing changed is the previous array itself.
 */
import { describe, expect, it } from 'vitest';
import { reuseRows, rowContentKey } from '../client-web/live-query.js';

describe('live query row identity', () => {
  it('keys rows by values and types, unambiguously', () => {
    expect(rowContentKey({ a: 1 })).not.toBe(rowContentKey({ a: '1' }));
    expect(rowContentKey({ a: 1 })).not.toBe(rowContentKey({ a: 1n }));
    expect(rowContentKey({ a: null })).not.toBe(rowContentKey({ a: 'null' }));
    expect(rowContentKey({ a: 'x', b: 'y' })).not.toBe(rowContentKey({ a: 'x1:y', b: null }));
    expect(rowContentKey({ a: new Uint8Array([1, 2]) })).not.toBe(rowContentKey({ a: new Uint8Array([1, 3]) }));
    expect(rowContentKey({ a: new Uint8Array([1, 2]) })).toBe(rowContentKey({ a: new Uint8Array([1, 2]) }));
    expect(rowContentKey({ a: 0 })).not.toBe(rowContentKey({ a: -0 }));
  });

  it('hands back unchanged rows and the same array when nothing changed', () => {
    const keys = new WeakMap<object, string>();
    const first = reuseRows([], keys, [{ id: 1, t: 'a' }, { id: 2, t: 'b' }, { id: 2, t: 'b' }]);
    const again = reuseRows(first, keys, [{ id: 1, t: 'a' }, { id: 2, t: 'b' }, { id: 2, t: 'b' }]);
    expect(again).toBe(first);
    const changed = reuseRows(first, keys, [{ id: 2, t: 'b' }, { id: 1, t: 'a*' }, { id: 2, t: 'b' }, { id: 3, t: 'c' }]);
    expect(changed).not.toBe(first);
    expect(changed).toEqual([{ id: 2, t: 'b' }, { id: 1, t: 'a*' }, { id: 2, t: 'b' }, { id: 3, t: 'c' }]);
    // Both duplicates are reused, each once; the changed and the new row are new objects.
    expect(changed[0]).toBe(first[1]);
    expect(changed[2]).toBe(first[2]);
    expect(changed[1]).not.toBe(first[0]);
    // Reordering alone is a change, with every object kept.
    const reordered = reuseRows(changed, keys, [{ id: 3, t: 'c' }, { id: 2, t: 'b' }, { id: 2, t: 'b' }, { id: 1, t: 'a*' }]);
    expect(reordered).not.toBe(changed);
    for (const row of reordered) expect(changed).toContain(row);
    expect(new Set(reordered).size).toBe(4);
    // Rows in place are kept where they are; the others are matched among the rows left over,
    // duplicates one to one.
    const x = { id: 9, t: 'x' };
    const y = { id: 8, t: 'y' };
    const y2 = { id: 8, t: 'y' };
    const base = reuseRows([], keys, [x, y, y2, { id: 7, t: 'z' }]);
    const moved = reuseRows(base, keys, [{ id: 9, t: 'x' }, { id: 7, t: 'z' }, { id: 8, t: 'y' }, { id: 8, t: 'y' }, { id: 6, t: 'w' }]);
    expect(moved[0]).toBe(base[0]);
    expect(moved[1]).toBe(base[3]);
    expect(moved[2]).toBe(base[2]);
    expect(moved[3]).toBe(base[1]);
    expect(base).not.toContain(moved[4]);
  });
});
