/**
 * The app's reads and writes of its local tables. Every write is plain SQL on the local database;
 * the client's triggers capture it, so syncing needs nothing more from here. Reads are bounded:
 * the todo panel shows one page of the selected list.
 */
import type { WorkerSyncClient } from '../../client-web/browser/worker-client.js';

export interface ListRow {
  readonly id: string;
  readonly title: string;
  readonly todoCount: number;
}

export interface TodoRow {
  readonly id: string;
  readonly title: string;
  readonly done: boolean;
  readonly attachmentName: string | null;
  readonly attachmentBytes: number | null;
}

export interface Counts {
  readonly lists: number;
  readonly todos: number;
}

/** To-dos shown at once; a longer list is paged. */
export const TODOS_PAGE_SIZE = 200;
/** Attachments travel base64 in push chunks of at most 4 MiB; a small cap keeps them well inside. */
export const ATTACHMENT_BYTES_MAX = 512 * 1024;

const now = () => new Date().toISOString();

export function createStore(db: WorkerSyncClient) {
  return {
    async counts(): Promise<Counts> {
      const [row] = await db.query<{ lists: number; todos: number }>('SELECT (SELECT count(*) FROM lists) AS lists, (SELECT count(*) FROM todos) AS todos');
      return { lists: Number(row?.lists ?? 0), todos: Number(row?.todos ?? 0) };
    },

    async lists(): Promise<ListRow[]> {
      const rows = await db.query<{ id: string; title: string; n: number }>(
        'SELECT l.id, l.title, (SELECT count(*) FROM todos t WHERE t.list_id = l.id) AS n FROM lists l ORDER BY l.created_at, l.id');
      return rows.map((r) => ({ id: r.id, title: r.title, todoCount: Number(r.n) }));
    },

    /** One page of a list's to-dos in position order (new ones come last). */
    async todos(listId: string, page: number): Promise<TodoRow[]> {
      // todos_by_list serves both the filter and the order.
      const rows = await db.query<{ id: string; title: string; done: number; attachment_name: string | null; size: number | null }>(
        'SELECT id, title, done, attachment_name, length(attachment) AS size FROM todos WHERE list_id = ? ORDER BY position, id LIMIT ? OFFSET ?',
        [listId, TODOS_PAGE_SIZE, page * TODOS_PAGE_SIZE]);
      return rows.map((r) => ({ id: r.id, title: r.title, done: Number(r.done) === 1, attachmentName: r.attachment_name, attachmentBytes: r.size === null ? null : Number(r.size) }));
    },

    async addList(title: string): Promise<string> {
      const id = crypto.randomUUID();
      await db.run('INSERT INTO lists (id, title, created_at) VALUES (?, ?, ?)', [id, title, now()]);
      return id;
    },

    async renameList(id: string, title: string): Promise<void> {
      await db.run('UPDATE lists SET title = ? WHERE id = ? AND title <> ?', [title, id, title]);
    },

    /** Deletes the list and its todos in one transaction (one bundle when it syncs). */
    async deleteList(id: string): Promise<void> {
      await db.transaction([
        { sql: 'DELETE FROM todos WHERE list_id = ?', params: [id] },
        { sql: 'DELETE FROM lists WHERE id = ?', params: [id] },
      ]);
    },

    async addTodo(listId: string, title: string, file: { name: string; bytes: Uint8Array } | null): Promise<string> {
      const id = crypto.randomUUID();
      await db.run(
        `INSERT INTO todos (id, list_id, title, done, position, attachment, attachment_name, updated_at)
         VALUES (?, ?, ?, 0, (SELECT coalesce(max(position), 0) + 1 FROM todos WHERE list_id = ?), ?, ?, ?)`,
        [id, listId, title, listId, file?.bytes ?? null, file?.name ?? null, now()]);
      return id;
    },

    async renameTodo(id: string, title: string): Promise<void> {
      await db.run('UPDATE todos SET title = ?, updated_at = ? WHERE id = ? AND title <> ?', [title, now(), id, title]);
    },

    async setDone(id: string, done: boolean): Promise<void> {
      await db.run('UPDATE todos SET done = ?, updated_at = ? WHERE id = ?', [done ? 1 : 0, now(), id]);
    },

    async deleteTodo(id: string): Promise<void> {
      await db.run('DELETE FROM todos WHERE id = ?', [id]);
    },

    async attachment(id: string): Promise<{ name: string; bytes: Uint8Array } | null> {
      const [row] = await db.query<{ attachment: Uint8Array | null; attachment_name: string | null }>('SELECT attachment, attachment_name FROM todos WHERE id = ?', [id]);
      return row?.attachment ? { name: row.attachment_name ?? 'attachment', bytes: row.attachment } : null;
    },
  };
}

export type Store = ReturnType<typeof createStore>;
