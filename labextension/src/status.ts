/**
 * The status bar item of a Crystal notebook: mode · approval · provider:model · prompt
 * set. The kernel publishes these in its kernel_info reply under `crystal`
 * (crystal_kernel/jupyter/status_info.py); the item asks again each time the kernel
 * goes idle, so slash commands such as /mode show up right away.
 */
import { ISessionContext } from '@jupyterlab/apputils';
import { INotebookTracker } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';
import { Signal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { api, IStatus, serverInfo } from './api';
import { isCrystalKernel, onKernelSpecsChanged } from './kernelspec';

export { KERNEL_NAME } from './kernelspec';

/** How long a kernel may take to answer kernel_info before the saved status is shown. */
const KERNEL_ANSWER_MS = 800;
const WAITED = Symbol('waited');
const wait = (ms: number) => new Promise<typeof WAITED>(resolve => window.setTimeout(() => resolve(WAITED), ms));

/** What JupyterLab says of the notebook's kernel, in the item's words. */
function kernelState(context: ISessionContext): string {
  const state = context.kernelDisplayStatus;
  switch (state) {
    case 'dead':
      return 'kernel dead';
    case 'disconnected':
      return 'disconnected';
    case 'terminating':
      return 'shutting down';
    case 'unknown':
    case 'initializing':
      return 'starting';
    default:
      return state;
  }
}

export class CrystalStatus extends Widget {
  readonly changed = new Signal<this, void>(this);
  private context: ISessionContext | null = null;
  private lastStatus: Kernel.Status | null = null;
  private active = false;
  /** Counts the questions to the kernel: only the newest answer is shown. */
  private asked = 0;

  constructor(private tracker: INotebookTracker) {
    super();
    this.addClass('jp-crystal-status');
    this.node.title = 'Crystal session: mode · approval mode · model · prompt set';
    tracker.currentChanged.connect(this.follow, this);
    onKernelSpecsChanged(() => {
      if (!this.isDisposed) {
        void this.update_();
      }
    });
    this.follow();
  }

  get isActive(): boolean {
    return this.active;
  }

  /** Ask the kernel again (after a change made outside it, e.g. in the sidebar). */
  refresh(): void {
    void this.update_();
  }

  private follow(): void {
    if (this.context) {
      this.context.statusChanged.disconnect(this.onStatus, this);
      this.context.kernelChanged.disconnect(this.onKernel, this);
      this.context.connectionStatusChanged.disconnect(this.onKernel, this);
      this.context.sessionChanged.disconnect(this.onKernel, this); // shut down: no session
    }
    const panel = this.tracker.currentWidget;
    this.context = panel ? panel.sessionContext : null;
    this.lastStatus = null;
    if (this.context) {
      this.context.statusChanged.connect(this.onStatus, this);
      this.context.kernelChanged.connect(this.onKernel, this);
      this.context.connectionStatusChanged.connect(this.onKernel, this);
      this.context.sessionChanged.connect(this.onKernel, this); // shut down: no session
      // A notebook restored after a reload may get its kernel before this item hears
      // of it: ask again once its session is ready.
      void this.context.ready.then(() => this.update_()).catch(() => undefined);
    }
    void this.update_();
  }

  private onKernel(): void {
    void this.update_();
  }

  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    const previous = this.lastStatus;
    this.lastStatus = status;
    // Idle after anything else: the kernel may have changed mode etc. Any other change
    // but busy (starting, restarting, dead, …) is a state worth showing as it is.
    if (status !== previous && status !== 'busy') {
      void this.update_();
    }
  }

  private setActive(active: boolean): void {
    if (active !== this.active) {
      this.active = active;
      this.changed.emit();
    }
  }

  private async update_(): Promise<void> {
    const context = this.context;
    const asked = ++this.asked;
    const kernel = context?.session?.kernel ?? null;
    // With no kernel (shut down, or not started yet after a reload), the notebook says
    // whose it is: the kernel it asks for, or the kernelspec saved in its metadata.
    const spec = this.tracker.currentWidget?.model?.getMetadata('kernelspec') as { name?: string } | undefined;
    const crystal =
      !!context &&
      (kernel ? isCrystalKernel(kernel.name) : isCrystalKernel(context.kernelPreference.name || spec?.name));
    this.setActive(crystal);
    if (!context || !crystal) {
      return;
    }
    if (!kernel) {
      // The true state: no kernel at all (shut down, or none chosen), or one on its way.
      this.render(null, context.hasNoKernel || context.isDisposed ? 'no kernel' : kernelState(context));
      return;
    }
    if (kernel.connectionStatus !== 'connected' || !['idle', 'busy', 'unknown'].includes(kernel.status)) {
      this.render(null, kernelState(context));
      return; // asked again when it connects or goes idle
    }
    const answer = kernel.requestKernelInfo().then(
      reply => ((reply?.content as any)?.crystal as IStatus) || null,
      () => null
    );
    // A kernel running a turn (a form waiting for the person, e.g. after a reload)
    // answers only when the turn ends: meanwhile show the session's saved status.
    const early = await Promise.race([answer, wait(KERNEL_ANSWER_MS)]);
    if (early === WAITED) {
      const saved = await this.savedStatus();
      if (asked === this.asked && context === this.context) {
        this.render(saved, kernelState(context));
      }
    }
    const status = await answer;
    if (asked === this.asked && context === this.context) {
      this.render(status, status ? 'status unavailable' : kernelState(context));
    }
  }

  /** The current notebook's session as last saved (the server reads its document), or
   * null: no session yet, or kernels that run elsewhere (a gateway). */
  private async savedStatus(): Promise<IStatus | null> {
    const crystal = this.tracker.currentWidget?.model?.getMetadata('crystal') as { session_id?: unknown } | undefined;
    const id = crystal?.session_id;
    // Asked once per session id: a session this server does not hold (its kernels run
    // on a gateway, or the session is another Home's) was asked again at every status
    // change of a running turn, many times a second, each a 404 in the server's log.
    if (typeof id !== 'string' || !id || this.unsaved.has(id)) {
      return null;
    }
    this.gateway ??= serverInfo().then(
      info => !!info.gateway,
      () => false
    );
    if (await this.gateway) {
      return null; // the sessions live beside the kernels, on the gateway's side
    }
    try {
      return await api.status(id);
    } catch {
      this.unsaved.add(id);
      return null;
    }
  }

  /** Session ids the server answered no saved status for. */
  private unsaved = new Set<string>();
  /** Whether this server's kernels run on a gateway (asked once). */
  private gateway: Promise<boolean> | null = null;

  private render(status: IStatus | null, fallback: string): void {
    this.node.replaceChildren();
    const label = document.createElement('span');
    label.className = 'jp-crystal-status-label';
    label.textContent = 'Crystal';
    this.node.append(label);
    // [kind, value, the word that says what the value is]: "default · default" alone
    // does not say which is the approval mode and which the prompt set.
    const parts: [string, string, string][] = status && !status.error
      ? [
          ['mode', status.mode || '?', 'mode'],
          ['approval', status.approval || '?', 'approval'],
          ['model', status.provider && status.model ? `${status.provider}:${status.model}` : status.model || '?', ''],
          ['promptset', status.promptSet || 'default', 'prompts']
        ]
      : [['state', status?.error ? 'status unavailable' : fallback, '']];
    for (const [kind, text, name] of parts) {
      const span = document.createElement('span');
      span.className = `jp-crystal-status-${kind}`;
      span.textContent = text;
      if (!name) {
        this.node.append(span);
        continue;
      }
      // The value keeps its own span (its text is the value alone); the name sits beside it.
      const part = document.createElement('span');
      part.className = 'jp-crystal-status-part';
      const key = document.createElement('span');
      key.className = 'jp-crystal-status-key';
      key.textContent = `${name} `;
      part.append(key, span);
      this.node.append(part);
    }
  }

  dispose(): void {
    this.tracker.currentChanged.disconnect(this.follow, this);
    if (this.context) {
      this.context.statusChanged.disconnect(this.onStatus, this);
      this.context.kernelChanged.disconnect(this.onKernel, this);
      this.context.connectionStatusChanged.disconnect(this.onKernel, this);
      this.context.sessionChanged.disconnect(this.onKernel, this); // shut down: no session
    }
    super.dispose();
  }
}
