/**
 * Plain-DOM helpers of the demo: element lookup by id, and a keyed update of a list's children
 * that keeps existing elements (so an input being edited keeps its focus and text while other
 * devices' changes arrive).
 */

/** The element with this id; a missing one is a bug in index.html. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`index.html has no #${id}`);
  return element as T;
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> & { testid?: string } = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const { testid, ...rest } = props;
  const element = Object.assign(document.createElement(tag), rest);
  if (testid) element.dataset['testid'] = testid;
  element.append(...children);
  return element;
}

/** Sets an input's value unless the user is typing in it. */
export function setInputValue(input: HTMLInputElement, value: string): void {
  if (document.activeElement !== input && input.value !== value) input.value = value;
}

/**
 * Makes `parent`'s children one element per item, in order: reuses the element of a known key
 * (and calls `update` on it), creates the others, removes the rest.
 */
export function reconcile<T>(parent: HTMLElement, items: readonly T[], key: (item: T) => string, create: (item: T) => HTMLElement, update: (element: HTMLElement, item: T) => void): void {
  const existing = new Map<string, HTMLElement>();
  for (const child of Array.from(parent.children)) {
    if (child instanceof HTMLElement && child.dataset['key'] !== undefined) existing.set(child.dataset['key'], child);
  }
  let cursor: Element | null = parent.firstElementChild;
  for (const item of items) {
    const k = key(item);
    let element = existing.get(k);
    if (element) existing.delete(k);
    else {
      element = create(item);
      element.dataset['key'] = k;
    }
    update(element, item);
    if (element !== cursor) parent.insertBefore(element, cursor);
    else cursor = cursor.nextElementSibling;
  }
  for (const stale of existing.values()) stale.remove();
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
