/**
 * What Crystal adds to notebooks:
 *
 * - Copy and "Insert" buttons on the code blocks of Crystal answers
 *   (`.crystal-answer pre.crystal-code`, made by crystal_kernel/jupyter/safe_html.py). In a
 *   Crystal notebook a Python block is inserted as a runnable `%%python` cell (the
 *   person's own Python, NB-1, never a prompt) and any other block as a Markdown cell
 *   with a fenced block, so it never reaches the model as a prompt; in other notebooks
 *   as a code cell.
 *   The buttons are added in the page, never saved in the output, so a notebook opened
 *   without a kernel (or exported to static HTML) shows plain, readable code blocks and
 *   gets the buttons again as soon as JupyterLab shows it.
 * - Prompt cells wrap long lines: every cell of a Crystal-kernel notebook, and `%%crystal`
 *   cells of any notebook.
 * - `%%crystal` cells are edited as Markdown, not highlighted as Python; `%%python` cells
 *   of a Crystal notebook are highlighted as Python.
 * - The notebook follows new text while the person is at its end (follow.ts).
 *
 * Nothing here reads output HTML as markup: code is taken with textContent and buttons
 * are made with createElement.
 */
import { Clipboard } from '@jupyterlab/apputils';
import type { Cell, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';

import { followNewText } from './follow';
import { handOver } from './handover';
import { isCrystalKernel } from './kernelspec';

const CODE_SELECTOR = '.crystal-answer pre.crystal-code';
const STREAMING_SELECTOR = '.jp-crystal-streaming';
const DONE = 'crystalTools';
const MAGIC = /^\s*%%crystal\b/;
/** The first line of the person's own Python in a Crystal notebook (crystal_kernel/jupyter/person_cells.py). */
const PYTHON_CELL = /^\s*%%python[ \t]*(\n|$)/;
const PYTHON_LANGS = new Set(['python', 'py', 'python3', 'ipython', 'ipython3']);
const PYTHON_MIME = 'text/x-ipython';

/** What Insert makes of a code block: a `%%python` cell, a Markdown cell or a code cell. */
export type InsertKind = 'python' | 'markdown' | 'code';

export function insertKind(crystal: boolean, lang: string): InsertKind {
  if (!crystal) {
    return 'code';
  }
  return PYTHON_LANGS.has(lang.toLowerCase()) ? 'python' : 'markdown';
}

function isCrystalNotebook(panel: NotebookPanel): boolean {
  const kernel = panel.sessionContext.session?.kernel;
  // With no kernel (shut down, or not back yet after a reload) the notebook says whose
  // it is: the kernel it asks for, or the kernelspec saved in its metadata.
  const spec = panel.model?.getMetadata('kernelspec') as { name?: string } | undefined;
  const name = kernel?.name ?? (panel.sessionContext.kernelPreference.name || spec?.name);
  return isCrystalKernel(name);
}

/** The Insert button says what it makes. */
function labelInsert(button: HTMLButtonElement, crystal: boolean): void {
  const kind = insertKind(crystal, button.dataset.lang ?? '');
  button.textContent =
    kind === 'python' ? 'Insert as %%python cell' : kind === 'markdown' ? 'Insert as Markdown cell' : 'Insert as new cell';
  button.title =
    kind === 'python'
      ? 'Insert this code below the answer as a %%python cell: your own Python, run in this kernel, never sent to the model as a prompt'
      : kind === 'markdown'
        ? 'Insert this code below the answer as a Markdown cell (never sent to the model)'
        : 'Insert this code as a new cell below the answer';
}

/** The cell (and its index) whose node holds `node`. */
function cellOf(panel: NotebookPanel, node: Node): [Cell, number] | null {
  const cells = panel.content.widgets;
  for (let i = 0; i < cells.length; i++) {
    if (cells[i].node.contains(node)) {
      return [cells[i], i];
    }
  }
  return null;
}

/** `code` as a Markdown fenced block: a fence longer than any run of backticks in it. */
export function fenced(code: string, lang: string): string {
  const longest = Math.max(0, ...(code.match(/`+/g) ?? []).map(run => run.length));
  const fence = '`'.repeat(Math.max(3, longest + 1));
  const info = /^[\w+#.-]*$/.test(lang) ? lang : '';
  return `${fence}${info}\n${code.replace(/\n$/, '')}\n${fence}`;
}

function toolbarFor(panel: NotebookPanel, pre: HTMLElement): HTMLElement {
  const bar = document.createElement('div');
  bar.className = 'jp-crystal-code-tools';
  const code = () => (pre.querySelector('code') ?? pre).textContent ?? '';
  const copy = document.createElement('button');
  copy.type = 'button';
  copy.className = 'jp-crystal-button jp-crystal-copy';
  copy.textContent = 'Copy';
  copy.title = 'Copy this code to the clipboard';
  copy.addEventListener('click', event => {
    event.stopPropagation();
    const text = code();
    Clipboard.copyToSystem(text);
    // navigator.clipboard is the modern path (needs a secure context or localhost).
    void navigator.clipboard?.writeText(text).catch(() => undefined);
    copy.textContent = 'Copied';
    window.setTimeout(() => (copy.textContent = 'Copy'), 1500);
  });
  // In a Crystal notebook every code cell is a prompt: code inserted as one would reach
  // the model as the person's message when run. There Python becomes a `%%python` cell
  // (the person's own Python, run in the kernel's namespace) and other code a Markdown
  // cell holding it as a fenced block (running it only renders it); elsewhere a code cell.
  const insert = document.createElement('button');
  insert.type = 'button';
  insert.className = 'jp-crystal-button jp-crystal-insert';
  insert.dataset.lang = pre.dataset.lang ?? '';
  labelInsert(insert, isCrystalNotebook(panel));
  insert.addEventListener('click', event => {
    event.stopPropagation();
    const found = cellOf(panel, pre);
    const notebook = panel.content;
    if (found) {
      notebook.activeCellIndex = found[1];
    }
    const kind = insertKind(isCrystalNotebook(panel), pre.dataset.lang ?? '');
    NotebookActions.insertBelow(notebook);
    if (kind === 'markdown') {
      NotebookActions.changeCellType(notebook, 'markdown');
    }
    const cell = notebook.activeCell;
    if (cell) {
      const text = code();
      cell.model.sharedModel.setSource(
        kind === 'markdown'
          ? fenced(text, pre.dataset.lang ?? '')
          : kind === 'python'
            ? `%%python\n${text.replace(/\n$/, '')}`
            : text
      );
      notebook.mode = 'edit';
      cell.editor?.focus();
    }
  });
  bar.append(copy, insert);
  return bar;
}

function decorate(panel: NotebookPanel): void {
  panel.content.node.querySelectorAll<HTMLElement>(CODE_SELECTOR).forEach(pre => {
    if (pre.dataset[DONE]) {
      return;
    }
    pre.dataset[DONE] = '1';
    pre.parentElement?.insertBefore(toolbarFor(panel, pre), pre);
  });
}

const styled = new WeakMap<Cell, () => void>();

/** Wrap and set the language of a prompt cell; follows its source and the kernel. */
function styleCell(panel: NotebookPanel, cell: Cell): void {
  if (cell.model.type !== 'code') {
    return;
  }
  const known = styled.get(cell);
  if (known) {
    known();
    return;
  }
  const apply = () => {
    if (cell.isDisposed) {
      return;
    }
    const crystalNotebook = isCrystalNotebook(panel);
    const source = cell.model.sharedModel.getSource();
    const magic = MAGIC.test(source);
    const python = crystalNotebook && PYTHON_CELL.test(source);
    if ((crystalNotebook && !python) || magic) {
      cell.editor?.setOption('lineWrap', true);
      cell.addClass('jp-crystal-prompt-cell');
    } else if (cell.hasClass('jp-crystal-prompt-cell')) {
      cell.editor?.setOption('lineWrap', false);
      cell.removeClass('jp-crystal-prompt-cell');
    }
    const model = cell.model as ICodeCellModel;
    if (!crystalNotebook || python || model.mimeType === PYTHON_MIME) {
      // A %%python cell of a Crystal notebook reads as Python; it goes back to the
      // notebook's own (Markdown) when the marker is taken out.
      const wanted = magic ? 'text/markdown' : python ? PYTHON_MIME : panel.content.codeMimetype;
      if (model.mimeType !== wanted) {
        model.mimeType = wanted;
      }
    }
  };
  styled.set(cell, apply);
  void cell.ready.then(apply);
  cell.model.contentChanged.connect(apply);
}

/** Whether a mutation added a code block of an answer. */
function addsCode(record: MutationRecord): boolean {
  return Array.from(record.addedNodes).some(
    node => node instanceof Element && (node.matches('pre.crystal-code') || node.querySelector('pre.crystal-code'))
  );
}

function follow(panel: NotebookPanel): void {
  const notebook = panel.content;
  followNewText(panel, () => isCrystalNotebook(panel) || !!notebook.node.querySelector(STREAMING_SELECTOR));
  const restyle = () => {
    notebook.widgets.forEach(cell => styleCell(panel, cell));
    const crystal = isCrystalNotebook(panel);
    notebook.node.querySelectorAll<HTMLButtonElement>('.jp-crystal-insert').forEach(b => labelInsert(b, crystal));
  };
  void panel.sessionContext.ready.then(restyle);
  panel.sessionContext.kernelChanged.connect(restyle);
  notebook.model?.cells.changed.connect(() => {
    // New cells get their widgets after this signal: style them on the next frame.
    window.requestAnimationFrame(restyle);
  });
  let pending = 0;
  const observer = new MutationObserver(records => {
    handOver(records); // a streamed output emptied at its end stays shown until its final one is in
    if (records.some(addsCode)) {
      // At once (before the page is painted): a code block, streamed or final, never
      // shows without its buttons, so its height does not change a frame later.
      decorate(panel);
      return;
    }
    if (!pending) {
      pending = window.requestAnimationFrame(() => {
        pending = 0;
        decorate(panel);
      });
    }
  });
  observer.observe(notebook.node, { childList: true, subtree: true });
  decorate(panel);
  panel.disposed.connect(() => observer.disconnect());
}

export function activateAnswers(tracker: INotebookTracker): void {
  tracker.forEach(follow);
  tracker.widgetAdded.connect((_, panel) => follow(panel));
}
