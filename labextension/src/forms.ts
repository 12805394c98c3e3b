/**
 * Crystal's forms in the notebook (issue 18): focus after a form click, reload and
 * restart (see crystal_kernel/jupyter/live_outputs.py for the kernel side).
 *
 * - Focus: clicking a form button makes JupyterLab activate the running cell, so a
 *   following Shift+Enter would run it again. After a click inside a `.crystal-form`,
 *   the cell that was active before comes back (or the next cell; with none, focus
 *   leaves the notebook).
 * - Reload: a reloaded page does not follow the messages of a turn that was already
 *   running. Each Crystal output names its cell and display id in
 *   `metadata.crystal`; such messages that no cell of this page follows are put into
 *   that cell here (added, or replacing the output with the same display id).
 * - Restart: on connecting to a kernel the extension opens the `crystal.live` comm;
 *   the kernel shows its waiting forms again and lists its live display ids. Every
 *   live Crystal output it does not list is replaced by its `stale` bundle, which says
 *   the truth (no "model not found" widgets, no jobs "running" forever).
 * - Never saved: the reply also lists the cells whose turn still runs, with their
 *   source. A cell this page lacks (the notebook was reloaded from a file saved before
 *   the cell was typed) is added at the end with the same id, and the outputs the
 *   kernel shows again are routed into it.
 * - The running cell's `[*]`: JupyterLab shows a cell as running from the request this
 *   page sent until that request's reply. After a reload the reply goes to the page that
 *   is gone, so the reply also names each running cell's request and execution count:
 *   the cell shows `[*]` and, when the kernel goes idle for that request (iopub reaches
 *   every page), its count, as if this page had run it. A cell left `[*]` in a shared
 *   (real-time collaboration) document while the kernel is idle and runs nothing is
 *   set back to idle.
 * - A new form is scrolled into view (only as far as needed): it waits for the person,
 *   and one that appears below the fold would otherwise go unseen.
 * - Notebook identity (SPEC §13): the notebook keeps its Crystal session's id in
 *   `metadata.crystal.session_id`, taken from the `metadata.crystal.session` every
 *   Crystal output carries. The comm's open message sends it with the notebook's path
 *   now (`notebook: {path, sessionId}`), on connecting, after each restart and after a
 *   rename, so the kernel continues this notebook's session
 *   (crystal_kernel/jupyter/notebook_identity.py).
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { KernelMessage } from '@jupyterlab/services';

import { isCrystalKernel } from './kernelspec';

const FORM = '.crystal-form';
const COMM_TARGET = 'crystal.live';
const LIVE_REPLY_MS = 10000;

interface ICrystalMeta {
  display?: string;
  cell?: string;
  session?: string;
  live?: boolean;
  stale?: Record<string, unknown>;
}

interface IPendingClick {
  panel: NotebookPanel;
  before: number;
  mode: string;
  formIndex: number;
}

function crystalMeta(metadata: unknown): ICrystalMeta | null {
  const value = (metadata as any)?.crystal;
  return value && typeof value === 'object' ? (value as ICrystalMeta) : null;
}

/** Put the focus back where the person was before clicking a form button. */
function restoreFocus(click: IPendingClick): void {
  const nb = click.panel.content;
  const count = nb.widgets.length;
  let index = -1;
  if (click.before >= 0 && click.before < count && click.before !== click.formIndex) {
    index = click.before;
  } else if (click.formIndex + 1 < count) {
    index = click.formIndex + 1;
  }
  if (index < 0) {
    nb.mode = 'command';
    (document.activeElement as HTMLElement | null)?.blur();
    return;
  }
  nb.activeCellIndex = index;
  if (index === click.before && click.mode === 'edit') {
    nb.mode = 'edit';
    nb.activeCell?.editor?.focus();
  } else {
    nb.mode = 'command';
    nb.node.focus();
  }
}

function watchFocus(tracker: INotebookTracker): void {
  let pending: IPendingClick | null = null;
  document.addEventListener(
    'mousedown',
    event => {
      const form = (event.target as HTMLElement | null)?.closest?.(FORM);
      if (!form) {
        pending = null;
        return;
      }
      const panel = tracker.find(p => p.node.contains(form));
      if (!panel) {
        return;
      }
      const nb = panel.content;
      const formIndex = nb.widgets.findIndex(cell => cell.node.contains(form));
      // Typing into the form first (a click in its text field) keeps the earlier place.
      if (pending && pending.panel === panel && pending.formIndex === formIndex) {
        return;
      }
      pending = { panel, before: nb.activeCellIndex, mode: nb.mode, formIndex };
    },
    true
  );
  document.addEventListener(
    'click',
    event => {
      const button = (event.target as HTMLElement | null)?.closest?.(`${FORM} button`);
      if (!button || !pending) {
        return;
      }
      const click = pending;
      pending = null;
      // After JupyterLab's own handlers have made the form's cell active.
      window.setTimeout(() => restoreFocus(click), 0);
    },
    true
  );
}

/** The code cells of a panel as loosely typed objects (no @jupyterlab/cells import). */
function codeCells(panel: NotebookPanel): any[] {
  return panel.content.widgets.filter(cell => cell.model.type === 'code') as any[];
}

function findOutput(outputs: any, display: string): number {
  for (let i = 0; i < outputs.length; i++) {
    const meta = crystalMeta(outputs.get(i).metadata);
    if (meta?.display === display) {
      return i;
    }
  }
  return -1;
}

const SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The notebook's metadata.crystal (an object, or an empty one). */
function notebookCrystal(panel: NotebookPanel): Record<string, unknown> {
  const value = panel.content.model?.getMetadata('crystal');
  return value && typeof value === 'object' ? { ...(value as Record<string, unknown>) } : {};
}

/** What the kernel is told about its notebook: its path now and its session's id. */
function notebookIdentity(panel: NotebookPanel): { path: string; sessionId: string | null } {
  const id = notebookCrystal(panel).session_id;
  return { path: panel.context.path, sessionId: typeof id === 'string' && SESSION_ID.test(id) ? id : null };
}

/** Keep the kernel's session in the notebook's metadata (saved with the notebook). */
function keepSession(panel: NotebookPanel, session: unknown): void {
  const model = panel.content.model;
  if (!model || typeof session !== 'string' || !SESSION_ID.test(session)) {
    return;
  }
  const crystal = notebookCrystal(panel);
  if (crystal.session_id !== session) {
    model.setMetadata('crystal', { ...crystal, session_id: session });
  }
}

/** Tell the kernel the notebook's new path (a rename or move), nothing else. */
function sendIdentity(panel: NotebookPanel): void {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.isDisposed || !isCrystalKernel(kernel.name)) {
    return;
  }
  try {
    const comm = kernel.createComm(COMM_TARGET);
    comm.open({ identityOnly: true, notebook: notebookIdentity(panel) });
    comm.close();
  } catch (error) {
    console.warn('Crystal: cannot tell the kernel the notebook was renamed', error);
  }
}

/** Put a Crystal display message nobody on this page follows into its cell. */
function route(panel: NotebookPanel, msg: KernelMessage.IMessage): void {
  const type = msg.header.msg_type;
  if (type !== 'display_data' && type !== 'update_display_data') {
    return;
  }
  const content = msg.content as any;
  const meta = crystalMeta(content.metadata);
  if (meta?.session && isCrystalKernel(panel.sessionContext.session?.kernel?.name)) {
    keepSession(panel, meta.session);
  }
  if (!meta?.display || !meta.cell) {
    return;
  }
  const cell = codeCells(panel).find(c => c.model.id === meta.cell);
  if (!cell) {
    return;
  }
  const parentId = (msg.parent_header as any)?.msg_id;
  const future = cell.outputArea?.future;
  if (future && future.msg?.header?.msg_id === parentId) {
    return; // this page ran the cell and follows it itself
  }
  const outputs = cell.model.outputs;
  const output = { output_type: 'display_data', data: content.data, metadata: content.metadata };
  const index = findOutput(outputs, meta.display);
  if (index >= 0) {
    outputs.set(index, output);
  } else {
    outputs.add(output);
  }
}

function hasCrystalOutputs(panel: NotebookPanel): boolean {
  return codeCells(panel).some(cell => {
    const outputs = cell.model.outputs;
    for (let i = 0; i < outputs.length; i++) {
      if (crystalMeta(outputs.get(i).metadata)) {
        return true;
      }
    }
    return false;
  });
}

/** Replace every live Crystal output the kernel no longer has by its stale bundle. */
function retireStale(panel: NotebookPanel, live: Set<string>): void {
  for (const cell of codeCells(panel)) {
    const outputs = cell.model.outputs;
    for (let i = 0; i < outputs.length; i++) {
      const item = outputs.get(i);
      const meta = crystalMeta(item.metadata);
      if (!meta?.live || !meta.display || live.has(meta.display) || !meta.stale) {
        continue;
      }
      const metadata = { crystal: { display: meta.display, cell: meta.cell } };
      outputs.set(i, { output_type: 'display_data', data: meta.stale, metadata });
    }
  }
}

interface IRunningCell {
  cell: string;
  source: string;
  /** The execute request's msg_id and the cell's execution count (the kernel's). */
  request?: string | null;
  count?: number | null;
}

/** Per panel: the running requests this page did not send, by msg_id (the cell's id and
 * count). Their execute_reply goes to the page that sent them (gone after a reload), so
 * this page ends the cell's run itself when the kernel says idle for that request. */
const adopted = new WeakMap<NotebookPanel, Map<string, { cell: string; count: number | null }>>();

/** A running cell this page did not run shows `[*]` until its turn ends. */
function adoptRunning(panel: NotebookPanel, running: IRunningCell[]): void {
  let pending = adopted.get(panel);
  if (!pending) {
    pending = new Map();
    adopted.set(panel, pending);
  }
  for (const item of running) {
    if (!item || typeof item.request !== 'string' || !item.request) {
      continue;
    }
    const cell = codeCells(panel).find(c => c.model.id === item.cell);
    if (!cell || cell.outputArea?.future?.msg?.header?.msg_id === item.request) {
      continue; // this page sent it: JupyterLab follows its reply
    }
    pending.set(item.request, { cell: item.cell, count: typeof item.count === 'number' ? item.count : null });
    cell.model.executionState = 'running';
  }
}

/** The kernel went idle for a request this page adopted: the cell's run is over. */
function endAdopted(panel: NotebookPanel, msg: KernelMessage.IMessage): void {
  if (msg.header.msg_type !== 'status' || (msg.content as any)?.execution_state !== 'idle') {
    return;
  }
  const pending = adopted.get(panel);
  const parentId = (msg.parent_header as any)?.msg_id;
  const entry = pending?.get(parentId);
  if (!pending || !entry) {
    return;
  }
  pending.delete(parentId);
  const cell = codeCells(panel).find(c => c.model.id === entry.cell);
  if (cell) {
    cell.model.executionCount = entry.count;
    cell.model.executionState = 'idle';
  }
}

/** Cells left `[*]` by a page that is gone (real-time collaboration keeps the state in
 * the shared document): the kernel is idle and runs none of them, so they are over. */
function endOrphans(panel: NotebookPanel, running: IRunningCell[]): void {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.status !== 'idle') {
    return; // busy: one may be queued by another page, which ends it itself
  }
  const listed = new Set(running.map(item => item?.cell));
  for (const cell of codeCells(panel)) {
    const future = cell.outputArea?.future;
    if (cell.model.executionState === 'running' && !listed.has(cell.model.id) && (!future || future.isDisposed)) {
      cell.model.executionState = 'idle';
    }
  }
}

/** Add the running cells this page lacks, at the end, with their id and source. */
function restoreRunning(panel: NotebookPanel, running: unknown): void {
  if (!Array.isArray(running)) {
    return;
  }
  const model = panel.content.model;
  if (!model) {
    return;
  }
  const have = new Set(codeCells(panel).map(cell => cell.model.id));
  for (const item of running as IRunningCell[]) {
    if (!item || typeof item.cell !== 'string' || !item.cell || have.has(item.cell)) {
      continue;
    }
    model.sharedModel.insertCell(model.sharedModel.cells.length, {
      cell_type: 'code',
      id: item.cell,
      source: typeof item.source === 'string' ? item.source : '',
      metadata: { trusted: true },
      outputs: [],
      execution_count: null
    } as any);
    // Trusted as every cell this page runs is: the form's widget view renders only in a
    // trusted output (an untrusted one falls back to the widget's text).
    const added = codeCells(panel).find(cell => cell.model.id === item.cell);
    if (added) {
      added.model.trusted = true;
    }
    have.add(item.cell);
  }
}

/** Ask a freshly connected kernel what is live; show the rest as stale. */
async function checkLive(panel: NotebookPanel): Promise<void> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || kernel.isDisposed) {
    return;
  }
  if (!isCrystalKernel(kernel.name) && !hasCrystalOutputs(panel)) {
    return; // a Python notebook that never used %crystal: do not bother its kernel
  }
  const live = await new Promise<Set<string> | null>(resolve => {
    let done = false;
    const finish = (value: Set<string> | null): void => {
      if (!done) {
        done = true;
        resolve(value);
      }
    };
    try {
      const comm = kernel.createComm(COMM_TARGET);
      comm.onMsg = msg => {
        const data = msg.content.data as any;
        const ids = data?.live;
        // Before the outputs the kernel shows next arrive (iopub keeps the order).
        restoreRunning(panel, data?.running);
        const running = Array.isArray(data?.running) ? (data.running as IRunningCell[]) : [];
        adoptRunning(panel, running);
        endOrphans(panel, running);
        finish(new Set<string>(Array.isArray(ids) ? ids : []));
        comm.close();
      };
      // No such target (the kernel never loaded Crystal): nothing of Crystal is live.
      comm.onClose = () => finish(new Set<string>());
      // streamDeltas: this page renders answers streamed as appended text (stream.ts).
      comm.open({ streamDeltas: true, notebook: notebookIdentity(panel) });
    } catch (error) {
      console.warn('Crystal: cannot ask the kernel what is live', error);
      finish(null);
    }
    window.setTimeout(() => finish(null), LIVE_REPLY_MS);
  });
  if (live !== null) {
    retireStale(panel, live);
  }
}

function watchPanel(panel: NotebookPanel): void {
  const context = panel.sessionContext;
  context.iopubMessage.connect((_, msg) => {
    route(panel, msg);
    endAdopted(panel, msg);
  });
  let lastKernel = '';
  const onStatus = (): void => {
    const kernel = context.session?.kernel;
    if (!kernel || kernel.connectionStatus !== 'connected') {
      return;
    }
    // Once per kernel connection (page load, kernel change) and after each restart.
    const key = `${kernel.id}:${(kernel as any).clientId}`;
    if (key !== lastKernel) {
      lastKernel = key;
      void checkLive(panel);
    }
  };
  context.connectionStatusChanged.connect(onStatus);
  panel.context.pathChanged.connect(() => sendIdentity(panel));
  context.statusChanged.connect((_, status) => {
    if (status === 'restarting' || status === 'autorestarting') {
      lastKernel = '';
    } else {
      onStatus();
    }
  });
  void context.ready.then(onStatus);
}

/** Scroll each form that appears in a notebook into view, as far as needed. */
function watchNewForms(tracker: INotebookTracker): void {
  const seen = new WeakSet<Element>();
  const reveal = (form: Element): void => {
    if (seen.has(form) || !tracker.find(panel => panel.node.contains(form))) {
      return;
    }
    seen.add(form);
    // After layout (the widget view fills the form in its own tick).
    window.setTimeout(() => form.scrollIntoView({ block: 'nearest', behavior: 'smooth' }), 100);
  };
  const observer = new MutationObserver(records => {
    for (const record of records) {
      // The widget view adds its classes after it is in the page: a class change counts.
      if (record.type === 'attributes' && record.target instanceof Element && record.target.matches(FORM)) {
        reveal(record.target);
      }
      record.addedNodes.forEach(node => {
        if (!(node instanceof Element)) {
          return;
        }
        if (node.matches(FORM)) {
          reveal(node);
        }
        node.querySelectorAll(FORM).forEach(reveal);
      });
    }
  });
  observer.observe(document.body, { childList: true, subtree: true, attributes: true, attributeFilter: ['class'] });
}

export function watchForms(tracker: INotebookTracker): void {
  watchFocus(tracker);
  watchNewForms(tracker);
  tracker.forEach(watchPanel);
  tracker.widgetAdded.connect((_, panel) => watchPanel(panel));
}
