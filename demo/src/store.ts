/**
 * The app's reads and writes of its local tables. Reads are SQL for live queries (the React
 * bindings' `useQuery` keeps them current); writes are plain SQL on the local database, which the
 * client's triggers capture, so syncing needs nothing more from here. The todo panel reads one page
 * of the selected list.
 */
import type { WorkerSyncClient } from '../../client-web/browser/worker-client.js';

/** To-dos shown at once; a longer list is paged. */
export const TODOS_PAGE_SIZE = 200;
/** Attachments travel base64 in push chunks of at most 4 MiB; a small cap keeps them well inside. */
export const ATTACHMENT_BYTES_MAX = 512 * 1024;

export const COUNTS_SQL = 'SELECT (SELECT count(*) FROM lists) AS lists, (SELECT count(*) FROM todos) AS todos';
export interface CountsRow extends Record<string, number> {
  lists: number;
  todos: number;
}

export const LISTS_SQL = 'SELECT l.id, l.title, (SELECT count(*) FROM todos t WHERE t.list_id = l.id) AS todo_count FROM lists l ORDER BY l.created_at, l.id';
export interface ListRow extends Record<string, string | number> {
  id: string;
  title: string;
  todo_count: number;
}

/** One page of a list's to-dos in position order (new ones come last); todos_by_list serves the filter and the order. */
export const TODOS_SQL = 'SELECT id, title, done, attachment_name, length(attachment) AS size FROM todos WHERE list_id = ? ORDER BY position, id LIMIT ? OFFSET ?';
export interface TodoRow extends Record<string, string | number | null> {
  id: string;
  title: string;
  done: number;
  attachment_name: string | null;
  size: number | null;
}

const now = () => new Date().toISOString();

export function createStore(db: WorkerSyncClient) {
  return {
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

    /** Adds a to-do last in its list; answers its id and how many the list holds now. */
    async addTodo(listId: string, title: string, file: { name: string; bytes: Uint8Array } | null): Promise<{ id: string; count: number }> {
      const id = crypto.randomUUID();
      await db.run(
        `INSERT INTO todos (id, list_id, title, done, position, attachment, attachment_name, updated_at)
         VALUES (?, ?, ?, 0, (SELECT coalesce(max(position), 0) + 1 FROM todos WHERE list_id = ?), ?, ?, ?)`,
        [id, listId, title, listId, file?.bytes ?? null, file?.name ?? null, now()]);
      const [row] = await db.query<{ n: number }>('SELECT count(*) AS n FROM todos WHERE list_id = ?', [listId]);
      return { id, count: Number(row?.n ?? 0) };
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
