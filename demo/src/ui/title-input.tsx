/**
 * A title edited in place: it commits on blur or Enter (an empty title restores the old one), and
 * while the user is typing it keeps their text, whatever other devices' changes arrive meanwhile.
 */
import { useEffect, useRef, useState } from 'react';

export function TitleInput({ value, testid, save }: { value: string; testid: string; save: (title: string) => void }) {
  const [draft, setDraft] = useState(value);
  const editing = useRef(false);
  useEffect(() => {
    if (!editing.current) setDraft(value);
  }, [value]);
  return (
    <input
      type="text"
      data-testid={testid}
      value={draft}
      onFocus={() => (editing.current = true)}
      onChange={(event) => setDraft(event.target.value)}
      onBlur={() => {
        editing.current = false;
        const title = draft.trim();
        if (title && title !== value) save(title);
        else setDraft(value);
      }}
      onKeyDown={(event) => event.key === 'Enter' && event.currentTarget.blur()}
    />
  );
}
