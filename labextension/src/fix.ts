/**
 * "Fix with Crystal" on an error output (NB-3), in any notebook: in a Crystal notebook
 * on the person's own `%%python` cells, elsewhere on any code cell.
 *
 * The button sends the cell's source and the error's traceback to the notebook's kernel
 * on the `crystal.sidebar` comm (the one the sidebar asks a kernel that runs elsewhere,
 * crystal_kernel/jupyter/sidebar_comm.py), op `fix`: the kernel runs a turn of the
 * notebook's own Crystal session (crystal_kernel/jupyter/fix_cell.py) and answers with
 * the whole corrected cell. The person sees the change as a line diff under the error
 * and applies it (the cell's source is replaced; nothing runs) or dismisses it. While
 * Crystal works, Stop closes the comm, which ends the turn in the kernel.
 *
 * A Python kernel without Crystal does not know the comm (it closes it at once): the
 * bar then says so and offers "Load Crystal and fix", which runs
 * `%load_ext crystal_kernel` in the kernel (the `%crystal` magics, whose session the
 * fix then uses) and asks again.
 *
 * The bar is added in the page, never saved in the output. Text from the kernel is set
 * with textContent; nothing is read as markup.
 */
import type { Cell, CodeCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';

import { isCrystalKernel } from './kernelspec';

const TARGET = 'crystal.sidebar';
const PYTHON_CELL = /^\s*%%python[ \t]*(\n|$)/;
/** A fix is a model turn: it may take a while, but not for ever. */
const REPLY_MS = 5 * 60 * 1000;
const BAR = 'jp-crystal-fix';
const NOT_LOADED = 'not-loaded';

interface IFixReply {
  source: string;
  explanation: string;
  session: string;
}

class FixError extends Error {
  constructor(
    message: string,
    readonly kind: string = ''
  ) {
    super(message);
  }
}

function isCrystalNotebook(panel: NotebookPanel): boolean {
  const kernel = panel.sessionContext.session?.kernel;
  return isCrystalKernel(kernel?.name ?? panel.sessionContext.kernelPreference.name);
}

/** Ask the kernel for a fix: one comm, one request, one reply. */
function askFix(
  kernel: Kernel.IKernelConnection,
  source: string,
  traceback: string[],
  stopper: (stop: () => void) => void
): Promise<IFixReply> {
  return new Promise<IFixReply>((resolve, reject) => {
    let done = false;
    const comm = kernel.createComm(TARGET);
    const finish = (error: FixError | null, data?: IFixReply) => {
      if (done) {
        return;
      }
      done = true;
      window.clearTimeout(timer);
      if (!comm.isDisposed) {
        try {
          comm.close();
        } catch {
          // already gone
        }
      }
      if (error) {
        reject(error);
      } else {
        resolve(data as IFixReply);
      }
    };
    const timer = window.setTimeout(
      () => finish(new FixError(`Crystal did not answer within ${REPLY_MS / 60000} minutes.`)),
      REPLY_MS
    );
    let greeted = false;
    comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
      const reply = msg.content.data as any;
      if (!reply || reply.id !== 1) {
        greeted = true; // the greeting sent on open: the kernel knows the comm
        return;
      }
      if (reply.ok) {
        finish(null, reply.data as IFixReply);
      } else {
        finish(new FixError(String(reply.error || 'Crystal could not fix the cell.')));
      }
    };
    // Closed at once: a kernel that does not know the comm (no Crystal loaded). Closed
    // later: the kernel restarted or stopped while Crystal was working.
    comm.onClose = () =>
      finish(
        greeted
          ? new FixError('The kernel stopped or restarted before Crystal answered: run the cell again, then press Fix.')
          : new FixError('This notebook\u2019s kernel has no Crystal session.', NOT_LOADED)
      );
    // Closing the comm stops the turn in the kernel (fix_cell.py).
    stopper(() => finish(new FixError('Stopped: the cell is as it was.')));
    try {
      comm.open({});
      comm.send({ id: 1, op: 'fix', args: { source, traceback } } as any);
    } catch (error) {
      finish(new FixError(`The kernel cannot be reached: ${error}`));
    }
  });
}

/** A line diff (longest common subsequence): each line with ' ', '-' or '+'. */
export function lineDiff(before: string, after: string): [string, string][] {
  const a = before.split('\n');
  const b = after.split('\n');
  const n = a.length;
  const m = b.length;
  const lcs: number[][] = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out: [string, string][] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push([' ', a[i]]);
      i++;
      j++;
    } else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push(['-', a[i]]); // the old line first, as diffs read
      i++;
    } else {
      out.push(['+', b[j]]);
      j++;
    }
  }
  return out;
}

function button(label: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'jp-crystal-button';
  b.textContent = label;
  b.title = title;
  b.addEventListener('click', event => {
    event.stopPropagation();
    onClick();
  });
  return b;
}

function diffView(before: string, after: string): HTMLElement {
  const pre = document.createElement('pre');
  pre.className = 'jp-crystal-fix-diff';
  pre.setAttribute('aria-label', 'The proposed change to the cell');
  Object.assign(pre.style, {
    margin: '6px 0',
    padding: '4px 0',
    fontFamily: 'var(--jp-code-font-family)',
    fontSize: 'var(--jp-code-font-size)',
    background: 'var(--jp-layout-color1)',
    border: 'var(--jp-border-width) solid var(--jp-border-color2)',
    color: 'var(--jp-content-font-color1)',
    overflowX: 'auto'
  });
  for (const [sign, text] of lineDiff(before.replace(/\n$/, ''), after.replace(/\n$/, ''))) {
    const line = document.createElement('div');
    line.className = sign === '+' ? 'jp-crystal-fix-added' : sign === '-' ? 'jp-crystal-fix-removed' : 'jp-crystal-fix-same';
    line.textContent = `${sign} ${text}`;
    line.style.padding = '0 8px';
    line.style.whiteSpace = 'pre';
    if (sign === '+') {
      line.style.color = 'var(--crystal-diff-added)';
      line.style.background = 'var(--crystal-diff-added-bg)';
    } else if (sign === '-') {
      line.style.color = 'var(--crystal-diff-removed)';
      line.style.background = 'var(--crystal-diff-removed-bg)';
    }
    pre.append(line);
  }
  return pre;
}

/** The Fix bar of one error output. */
function fixBar(panel: NotebookPanel, cell: CodeCell, traceback: string[]): HTMLElement {
  const bar = document.createElement('div');
  bar.className = BAR;
  Object.assign(bar.style, {
    padding: '4px 0 6px',
    whiteSpace: 'normal',
    fontFamily: 'var(--jp-ui-font-family)',
    fontSize: 'var(--jp-ui-font-size1)',
    color: 'var(--jp-ui-font-color1)'
  });
  const row = document.createElement('div');
  row.style.display = 'flex';
  row.style.gap = '8px';
  row.style.alignItems = 'center';
  const status = document.createElement('span');
  status.className = 'jp-crystal-fix-status';
  status.setAttribute('role', 'status');
  const body = document.createElement('div');
  const fix = button('Fix with Crystal', 'Send this cell and its error to the notebook\u2019s Crystal session and see the proposed change', () => void run());
  fix.classList.add('jp-crystal-fix-button');
  fix.style.whiteSpace = 'nowrap'; // one line, however long the status beside it
  fix.style.flex = 'none';
  row.append(fix, status);
  bar.append(row, body);

  const show = (text: string) => {
    status.textContent = text;
  };
  const run = async (): Promise<void> => {
    const kernel = panel.sessionContext.session?.kernel;
    body.replaceChildren();
    if (!kernel || kernel.connectionStatus !== 'connected') {
      show('The notebook\u2019s kernel is not running: start it, run the cell again, then press Fix.');
      return;
    }
    const source = cell.model.sharedModel.getSource();
    fix.disabled = true;
    show('Crystal is looking at the error\u2026');
    const stop = button('Stop', 'Stop Crystal\u2019s fix turn', () => undefined);
    stop.classList.add('jp-crystal-fix-stop');
    row.append(stop);
    try {
      const reply = await askFix(kernel, source, traceback, halt => stop.addEventListener('click', halt));
      show('');
      propose(source, reply);
    } catch (error) {
      const failure = error instanceof FixError ? error : new FixError(String(error));
      show(failure.message);
      if (failure.kind === NOT_LOADED) {
        show(
          'This notebook\u2019s kernel has no Crystal session. Load Crystal here (it runs %load_ext crystal_kernel, the %crystal magics, in this kernel) and ask again:'
        );
        const load = button('Load Crystal and fix', 'Run %load_ext crystal_kernel in this kernel, then ask Crystal for a fix', () => {
          load.disabled = true;
          void loadThenFix(kernel);
        });
        body.append(load);
      }
    } finally {
      stop.remove();
      fix.disabled = false;
    }
  };
  const loadThenFix = async (kernel: Kernel.IKernelConnection): Promise<void> => {
    show('Loading Crystal in this kernel\u2026');
    const future = kernel.requestExecute({ code: '%load_ext crystal_kernel', silent: true, store_history: false });
    const reply = await future.done;
    if (reply.content.status !== 'ok') {
      const content = reply.content as any;
      show(`Crystal could not be loaded: ${content.ename ?? ''} ${content.evalue ?? ''}`.trim());
      return;
    }
    await run();
  };
  const propose = (before: string, reply: IFixReply) => {
    if (reply.source.replace(/\n$/, '') === before.replace(/\n$/, '')) {
      show('Crystal proposes no change to this cell.');
      if (reply.explanation) {
        const note = document.createElement('div');
        note.textContent = reply.explanation;
        body.append(note);
      }
      return;
    }
    const title = document.createElement('div');
    title.className = 'jp-crystal-fix-title';
    title.textContent = 'Crystal proposes this change to the cell:';
    const actions = document.createElement('div');
    actions.style.display = 'flex';
    actions.style.gap = '8px';
    const apply = button('Apply', 'Replace the cell\u2019s source with the proposed one (it does not run)', () => {
      if (cell.model.sharedModel.getSource() !== before) {
        show('The cell changed since the fix was proposed: press Fix again.');
        body.replaceChildren();
        return;
      }
      cell.model.sharedModel.setSource(reply.source);
      body.replaceChildren();
      show('Applied: run the cell to try it.');
    });
    apply.classList.add('jp-crystal-fix-apply');
    const dismiss = button('Dismiss', 'Leave the cell as it is', () => {
      body.replaceChildren();
      show('');
    });
    dismiss.classList.add('jp-crystal-fix-dismiss');
    actions.append(apply, dismiss);
    body.append(title, diffView(before, reply.source));
    if (reply.explanation) {
      const note = document.createElement('div');
      note.className = 'jp-crystal-fix-explanation';
      note.textContent = reply.explanation;
      note.style.margin = '0 0 6px';
      body.append(note);
    }
    body.append(actions);
  };
  return bar;
}

/** Whether the cell's error output gets a Fix button. */
function fixable(panel: NotebookPanel, cell: Cell): cell is CodeCell {
  if (cell.model.type !== 'code') {
    return false;
  }
  // In a Crystal notebook a cell is a prompt; only the person's own Python is fixed.
  return !isCrystalNotebook(panel) || PYTHON_CELL.test(cell.model.sharedModel.getSource());
}

function decorate(panel: NotebookPanel): void {
  for (const cell of panel.content.widgets) {
    if (!fixable(panel, cell)) {
      continue;
    }
    const outputs = cell.model.outputs;
    for (let i = 0; i < outputs.length; i++) {
      const output = outputs.get(i);
      if (output.type !== 'error') {
        continue;
      }
      const child = cell.outputArea.widgets[i];
      // Inside the rendered error (under its traceback, in its box), not beside it.
      const host = child?.node.querySelector('.jp-OutputArea-output') ?? child?.node;
      if (!host || host.querySelector(`.${BAR}`)) {
        continue;
      }
      const json = output.toJSON() as { traceback?: string[]; ename?: string; evalue?: string };
      const traceback = json.traceback?.length ? json.traceback : [`${json.ename ?? 'Error'}: ${json.evalue ?? ''}`];
      host.append(fixBar(panel, cell, traceback));
    }
  }
}

function watch(panel: NotebookPanel): void {
  let pending = 0;
  const later = () => {
    if (!pending) {
      pending = window.requestAnimationFrame(() => {
        pending = 0;
        decorate(panel);
      });
    }
  };
  const observer = new MutationObserver(later);
  observer.observe(panel.content.node, { childList: true, subtree: true });
  panel.sessionContext.kernelChanged.connect(later);
  later();
  panel.disposed.connect(() => observer.disconnect());
}

/** NB-3: a Fix with Crystal button on the error outputs of every notebook. */
export function activateFix(tracker: INotebookTracker): void {
  tracker.forEach(watch);
  tracker.widgetAdded.connect((_, panel) => watch(panel));
}
