/**
 * The "Crystal" left sidebar: Sessions, Jobs (with live log tails and Stop) and Prompts.
 * It polls its source only while it is visible: logs every second, jobs every two
 * seconds, sessions and prompts every five. The source is the server's REST API, or,
 * when the kernels run elsewhere (a gateway), the current Crystal notebook's kernel
 * (kernelsource.ts); the line under the title says which.
 */
import { LabIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { NoSourceError, SourceGetter } from './api';
import { h } from './dom';
import { JobsSection, PromptsSection, SessionsSection } from './sections';

const TICK_MS = 1000;

export class CrystalSidebar extends Widget {
  readonly sessions: SessionsSection;
  readonly jobs: JobsSection;
  readonly prompts: PromptsSection;
  private readonly line: HTMLDivElement;
  private readonly where: HTMLDivElement;
  private timer: number | undefined;
  private ticks = 0;
  private polling = false;

  constructor(
    icon: LabIcon,
    private readonly source: SourceGetter,
    openSession: (id: string) => void,
    promptsChanged?: () => void
  ) {
    super();
    this.id = 'crystal-sidebar';
    this.addClass('jp-crystal-sidebar');
    this.title.icon = icon;
    this.title.caption = 'Crystal: sessions, jobs and prompts';
    const report = (message: string, error = false) => this.report(message, error);
    this.sessions = new SessionsSection(report, source, openSession);
    this.jobs = new JobsSection(report, source);
    this.prompts = new PromptsSection(report, source, promptsChanged);
    const refresh = h('button', { class: 'jp-crystal-icon-button jp-crystal-refresh', title: 'Refresh', type: 'button' });
    refreshIcon.element({ container: refresh, height: '16px', width: '16px' });
    refresh.addEventListener('click', () => void this.refreshAll());
    this.line = h('div', { class: 'jp-crystal-line', role: 'status' });
    this.where = h('div', { class: 'jp-crystal-source jp-crystal-muted' });
    this.node.append(
      h('div', { class: 'jp-crystal-header' }, h('h2', {}, 'Crystal'), refresh),
      this.where,
      this.line,
      this.sessions.node,
      this.jobs.node,
      this.prompts.node
    );
  }

  report(message: string, error = false): void {
    this.line.textContent = message;
    this.line.classList.toggle('jp-crystal-error', error);
  }

  async refreshAll(): Promise<void> {
    this.showWhere();
    await Promise.all([this.sessions.refresh(), this.jobs.refresh(), this.prompts.refresh()]);
  }

  /** Say where the data comes from (empty for the server's own folders). */
  private showWhere(): void {
    let label = '';
    try {
      label = this.source().label;
    } catch (error) {
      label = error instanceof NoSourceError ? '' : String(error);
    }
    this.where.textContent = label;
    this.where.hidden = !label;
  }

  protected onAfterShow(): void {
    void this.refreshAll();
    if (this.timer === undefined) {
      this.timer = window.setInterval(() => void this.tick(), TICK_MS);
    }
  }

  protected onBeforeHide(): void {
    this.stopTimer();
  }

  protected onAfterAttach(): void {
    if (this.isVisible) {
      this.onAfterShow();
    }
  }

  protected onBeforeDetach(): void {
    this.stopTimer();
  }

  dispose(): void {
    this.stopTimer();
    super.dispose();
  }

  private stopTimer(): void {
    if (this.timer !== undefined) {
      window.clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private async tick(): Promise<void> {
    if (this.polling) {
      return; // the previous poll has not answered yet: never pile requests up
    }
    this.polling = true;
    this.ticks += 1;
    try {
      if (this.ticks % 2 === 0 && this.jobs.open) {
        await this.jobs.refresh(); // also polls the open log tails
      } else {
        await this.jobs.pollLogs();
      }
      if (this.ticks % 5 === 0) {
        this.showWhere();
        await Promise.all([
          this.sessions.open ? this.sessions.refresh() : Promise.resolve(),
          this.prompts.open ? this.prompts.refresh() : Promise.resolve()
        ]);
      }
    } finally {
      this.polling = false;
    }
  }
}
