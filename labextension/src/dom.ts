/** A few DOM helpers: the sidebar is plain DOM (no React) to stay small. */

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | boolean | undefined> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) {
      continue;
    }
    if (key === 'class') {
      el.className = String(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      el.append(child);
    }
  }
  return el;
}

export function button(
  label: string,
  title: string,
  onClick: () => void,
  extraClass = ''
): HTMLButtonElement {
  const b = h('button', {
    class: `jp-crystal-button ${extraClass}`.trim(),
    title,
    type: 'button'
  });
  b.textContent = label;
  b.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return b;
}

/** "12 s", "4 min 3 s", "2 h 5 min". */
export function duration(seconds: number | null): string {
  if (seconds === null || seconds === undefined || isNaN(seconds)) {
    return '';
  }
  const s = Math.floor(seconds);
  if (s < 60) {
    return `${s} s`;
  }
  if (s < 3600) {
    return `${Math.floor(s / 60)} min ${s % 60} s`;
  }
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** A short local date and time from an ISO string. */
export function when(iso: string | null): string {
  if (!iso) {
    return '';
  }
  const date = new Date(iso);
  return isNaN(date.getTime()) ? iso : date.toLocaleString();
}
