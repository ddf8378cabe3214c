/**
 * The to-do panel of the selected list: one page at a time, each to-do with its done box, its
 * title edited in place, its attachment and a delete button; a form adds one (with a file).
 */
import { forwardRef, memo, useEffect, useRef, useState } from 'react';
import { useQuery } from '../../../client-web/react/index.js';
import { ATTACHMENT_BYTES_MAX, COUNTS_SQL, TODOS_PAGE_SIZE, TODOS_SQL, type CountsRow, type ListRow, type Store, type TodoRow } from '../store.js';
import { TitleInput } from './title-input.js';

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

async function download(store: Store, todoId: string): Promise<void> {
  const file = await store.attachment(todoId);
  if (!file) return;
  const url = URL.createObjectURL(new Blob([file.bytes as Uint8Array<ArrayBuffer>]));
  const a = document.createElement('a');
  a.href = url;
  a.download = file.name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

const TodoItem = memo(function TodoItem({ todo, store, act }: { todo: TodoRow; store: Store; act: (task: () => Promise<unknown>) => void }) {
  const done = Number(todo.done) === 1;
  // The box follows the click at once; the row that comes back from the database confirms it.
  const [checked, setChecked] = useState(done);
  useEffect(() => setChecked(done), [done]);
  return (
    <li data-testid="todo" data-id={todo.id} data-key={todo.id} data-title={todo.title} data-done={String(done)} className={done ? 'done' : ''}>
      <input type="checkbox" data-testid="todo-done" checked={checked} onChange={(event) => {
        setChecked(event.target.checked);
        act(() => store.setDone(todo.id, event.target.checked));
      }} />
      <TitleInput testid="todo-title" value={todo.title} save={(title) => act(() => store.renameTodo(todo.id, title))} />
      <a data-testid="todo-attachment" href="#" title="download the attachment" hidden={todo.attachment_name === null}
        onClick={(event) => {
          event.preventDefault();
          act(() => download(store, todo.id));
        }}>
        {todo.attachment_name ? `${todo.attachment_name} (${formatBytes(Number(todo.size ?? 0))})` : ''}
      </a>
      <button data-testid="todo-delete" title="delete" onClick={() => act(() => store.deleteTodo(todo.id))}>✕</button>
    </li>
  );
});

interface TodosProps {
  store: Store;
  list: ListRow | undefined;
  page: number;
  setPage: (page: number) => void;
  act: (task: () => Promise<unknown>) => void;
  showError: (message: string) => void;
}

export const Todos = forwardRef<HTMLElement, TodosProps>(function Todos({ store, list, page, setPage, act, showError }, ref) {
  const count = Number(list?.todo_count ?? 0);
  const pages = Math.ceil(count / TODOS_PAGE_SIZE);
  // Past the last page (to-dos deleted meanwhile): the last page there is.
  const shown = Math.max(0, Math.min(page, pages - 1));
  const todos = useQuery<TodoRow>(TODOS_SQL, [list?.id ?? '', TODOS_PAGE_SIZE, shown * TODOS_PAGE_SIZE]).rows;
  const counts = useQuery<CountsRow>(COUNTS_SQL).rows[0];
  const [title, setTitle] = useState('');
  const fileInput = useRef<HTMLInputElement>(null);
  const listRef = useRef<HTMLUListElement>(null);
  const [reveal, setReveal] = useState<string | null>(null);
  useEffect(() => {
    if (!reveal) return;
    const element = listRef.current?.querySelector(`[data-key="${reveal}"]`);
    if (!element) return;
    element.scrollIntoView({ block: 'nearest' });
    setReveal(null);
  }, [reveal, todos]);

  const add = () => {
    const trimmed = title.trim();
    if (!list || !trimmed) return;
    const file = fileInput.current?.files?.[0];
    if (file && file.size > ATTACHMENT_BYTES_MAX) return showError(`attachments are limited to ${formatBytes(ATTACHMENT_BYTES_MAX)} in this demo`);
    setTitle('');
    if (fileInput.current) fileInput.current.value = '';
    act(async () => {
      const added = await store.addTodo(list.id, trimmed, file ? { name: file.name, bytes: new Uint8Array(await file.arrayBuffer()) } : null);
      // A new to-do comes last: show the last page, and the new to-do on it.
      setPage(Math.max(0, Math.ceil(added.count / TODOS_PAGE_SIZE) - 1));
      setReveal(added.id);
    });
  };

  return (
    <section ref={ref} id="todos-panel">
      <h2>
        <span data-testid="current-list">{list ? list.title : 'No list selected'}</span>{' '}
        <span className="muted">(<span data-testid="count-todos">{Number(counts?.todos ?? 0)}</span> to-dos in all lists)</span>
      </h2>
      <form data-testid="new-todo-form" hidden={!list} onSubmit={(event) => {
        event.preventDefault();
        add();
      }}>
        <input data-testid="new-todo-title" type="text" placeholder="new to-do" required value={title} onChange={(event) => setTitle(event.target.value)} />
        <input data-testid="new-todo-file" type="file" ref={fileInput} />
        <button data-testid="add-todo" type="submit">Add</button>
      </form>
      <div className="pager" data-testid="todos-pager" hidden={pages <= 1}>
        <button data-testid="todos-prev" type="button" disabled={shown === 0} onClick={() => setPage(shown - 1)}>‹ Previous</button>
        <span className="muted" data-testid="todos-more">
          {pages > 1 ? `${shown * TODOS_PAGE_SIZE + 1}–${Math.min(count, (shown + 1) * TODOS_PAGE_SIZE)} of ${count} to-dos` : ''}
        </span>
        <button data-testid="todos-next" type="button" disabled={shown >= pages - 1} onClick={() => setPage(shown + 1)}>Next ›</button>
      </div>
      <ul data-testid="todos" ref={listRef}>
        {list ? todos.map((todo) => <TodoItem key={todo.id} todo={todo} store={store} act={act} />) : null}
      </ul>
    </section>
  );
});
