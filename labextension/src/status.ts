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

import { IStatus } from './api';
import { isCrystalKernel } from './kernelspec';

export { KERNEL_NAME } from './kernelspec';

export class CrystalStatus extends Widget {
  readonly changed = new Signal<this, void>(this);
  private context: ISessionContext | null = null;
  private lastStatus: Kernel.Status | null = null;
  private active = false;

  constructor(private tracker: INotebookTracker) {
    super();
    this.addClass('jp-crystal-status');
    this.node.title = 'Crystal session: mode · approval · model · prompt set';
    tracker.currentChanged.connect(this.follow, this);
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
    }
    const panel = this.tracker.currentWidget;
    this.context = panel ? panel.sessionContext : null;
    if (this.context) {
      this.context.statusChanged.connect(this.onStatus, this);
      this.context.kernelChanged.connect(this.onKernel, this);
    }
    void this.update_();
  }

  private onKernel(): void {
    void this.update_();
  }

  private onStatus(_: ISessionContext, status: Kernel.Status): void {
    const previous = this.lastStatus;
    this.lastStatus = status;
    if (status === 'idle' && previous !== 'idle') {
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
    const kernel = context?.session?.kernel;
    if (!context || !kernel || !isCrystalKernel(kernel.name)) {
      this.setActive(
        !!context && (isCrystalKernel(context.kernelPreference.name) || isCrystalKernel(context.session?.kernel?.name))
      );
      this.render(null, 'starting');
      return;
    }
    this.setActive(true);
    let status: IStatus | null = null;
    try {
      const reply = await kernel.requestKernelInfo();
      status = ((reply?.content as any)?.crystal as IStatus) || null;
    } catch {
      status = null;
    }
    if (context === this.context) {
      this.render(status, kernel.connectionStatus);
    }
  }

  private render(status: IStatus | null, fallback: string): void {
    this.node.replaceChildren();
    const label = document.createElement('span');
    label.className = 'jp-crystal-status-label';
    label.textContent = 'Crystal';
    this.node.append(label);
    const parts: [string, string][] = status && !status.error
      ? [
          ['mode', status.mode || '?'],
          ['approval', status.approval || '?'],
          ['model', status.provider && status.model ? `${status.provider}:${status.model}` : status.model || '?'],
          ['promptset', status.promptSet || 'default']
        ]
      : [['state', status?.error ? 'status unavailable' : fallback]];
    for (const [kind, text] of parts) {
      const span = document.createElement('span');
      span.className = `jp-crystal-status-${kind}`;
      span.textContent = text;
      this.node.append(span);
    }
  }

  dispose(): void {
    this.tracker.currentChanged.disconnect(this.follow, this);
    super.dispose();
  }
}
