/** The lists panel: every list with its to-do count, rename in place, delete, select, and a new-list form. */
import { memo, useState } from 'react';
import { useQuery } from '../../../client-web/react/index.js';
import { LISTS_SQL, type ListRow, type Store } from '../store.js';
import { TitleInput } from './title-input.js';

const ListItem = memo(function ListItem({ list, selected, store, select, act }: {
  list: ListRow; selected: boolean; store: Store; select: (id: string) => void; act: (task: () => Promise<unknown>) => void;
}) {
  return (
    <li data-testid="list" data-id={list.id} data-title={list.title} className={selected ? 'selected' : ''}>
      <button data-testid="list-select" title="open this list" onClick={() => select(list.id)}>▸</button>
      <TitleInput testid="list-title" value={list.title} save={(title) => act(() => store.renameList(list.id, title))} />
      <span className="muted" data-testid="list-count">{Number(list.todo_count)}</span>
      <button data-testid="list-delete" title="delete the list and its to-dos" onClick={() => act(() => store.deleteList(list.id))}>✕</button>
    </li>
  );
});

export function Lists({ store, selectedId, select, act }: { store: Store; selectedId: string | null; select: (id: string) => void; act: (task: () => Promise<unknown>) => void }) {
  const lists = useQuery<ListRow>(LISTS_SQL).rows;
  const [title, setTitle] = useState('');
  return (
    <section>
      <h2>Lists <span className="muted" data-testid="count-lists">{lists.length}</span></h2>
      <ul data-testid="lists">
        {lists.map((list) => <ListItem key={list.id} list={list} selected={list.id === selectedId} store={store} select={select} act={act} />)}
      </ul>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          const trimmed = title.trim();
          if (!trimmed) return;
          setTitle('');
          act(async () => select(await store.addList(trimmed)));
        }}
      >
        <input data-testid="new-list-title" type="text" placeholder="new list" required value={title} onChange={(event) => setTitle(event.target.value)} />
        <button data-testid="add-list" type="submit">Add list</button>
      </form>
    </section>
  );
}
