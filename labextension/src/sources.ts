/**
 * Which source the sidebar asks. A server whose kernels run on its own machine serves
 * the sidebar from its disk (the REST API). A server started with `--gateway-url` says
 * so in `GET crystal/api/info`; its kernels run elsewhere, so the sidebar asks the
 * current Crystal notebook's kernel over a comm (kernelsource.ts), one source per
 * kernel.
 */
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { api, ISource, NoSourceError, serverInfo } from './api';
import { KernelSource } from './kernelsource';
import { isCrystalKernel } from './kernelspec';

export class SourcePicker {
  /** null until the server has said where its kernels run. */
  private remote: boolean | null = null;
  private kernels = new Map<string, KernelSource>();
  private lastPanel: NotebookPanel | null = null;
  readonly ready: Promise<void>;

  constructor(private tracker: INotebookTracker | null) {
    this.ready = serverInfo()
      .then(info => {
        this.remote = !!info.gateway;
      })
      .catch(() => {
        this.remote = false; // an older server extension: its kernels are local
      });
    tracker?.currentChanged.connect(() => {
      const panel = tracker.currentWidget;
      if (panel && this.isCrystal(panel)) {
        this.lastPanel = panel;
      }
    });
  }

  get isRemote(): boolean {
    return this.remote === true;
  }

  private isCrystal(panel: NotebookPanel): boolean {
    const context = panel.sessionContext;
    return isCrystalKernel(context.session?.kernel?.name) || isCrystalKernel(context.kernelPreference.name);
  }

  /** The current Crystal notebook, or the last one that was current. */
  private crystalPanel(): NotebookPanel | null {
    const current = this.tracker?.currentWidget ?? null;
    if (current && !current.isDisposed && this.isCrystal(current)) {
      this.lastPanel = current;
      return current;
    }
    if (this.lastPanel && !this.lastPanel.isDisposed && this.isCrystal(this.lastPanel)) {
      return this.lastPanel;
    }
    const any = this.tracker?.find(panel => this.isCrystal(panel)) ?? null;
    this.lastPanel = any;
    return any;
  }

  readonly get = (): ISource => {
    if (this.remote === null) {
      throw new NoSourceError('Asking the server where its kernels run…');
    }
    if (!this.remote) {
      return api;
    }
    const panel = this.crystalPanel();
    if (!panel) {
      throw new NoSourceError(
        'This server\u2019s kernels run elsewhere (through a gateway), so their sessions, jobs and prompts are not on its disk. Open a Crystal notebook: the sidebar then shows what its kernel has.'
      );
    }
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel || !isCrystalKernel(kernel.name)) {
      throw new NoSourceError('The Crystal notebook\u2019s kernel is starting.');
    }
    for (const [id, source] of this.kernels) {
      if (source.isDisposed) {
        source.dispose();
        this.kernels.delete(id);
      }
    }
    let source = this.kernels.get(kernel.id);
    if (!source) {
      source = new KernelSource(kernel, `From the kernel of ${panel.context.path} (it runs elsewhere, through the gateway)`);
      this.kernels.set(kernel.id, source);
    }
    return source;
  };
}
