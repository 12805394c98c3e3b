/**
 * The "Crystal" left sidebar: Sessions, Jobs (with live log tails and Stop) and Prompts.
 * It polls the REST API only while it is visible: logs every second, jobs every two
 * seconds, sessions and prompts every five.
 */
import { LabIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { h } from './dom';
import { JobsSection, PromptsSection, SessionsSection } from './sections';

const TICK_MS = 1000;

export class CrystalSidebar extends Widget {
  readonly sessions: SessionsSection;
  readonly jobs: JobsSection;
  readonly prompts: PromptsSection;
  private readonly line: HTMLDivElement;
  private timer: number | undefined;
  private ticks = 0;
  private polling = false;

  constructor(icon: LabIcon, openSession: (id: string) => void, promptsChanged?: () => void) {
    super();
    this.id = 'crystal-sidebar';
    this.addClass('jp-crystal-sidebar');
    this.title.icon = icon;
    this.title.caption = 'Crystal: sessions, jobs and prompts';
    const report = (message: string, error = false) => this.report(message, error);
    this.sessions = new SessionsSection(report, openSession);
    this.jobs = new JobsSection(report);
    this.prompts = new PromptsSection(report, promptsChanged);
    const refresh = h('button', { class: 'jp-crystal-icon-button jp-crystal-refresh', title: 'Refresh', type: 'button' });
    refreshIcon.element({ container: refresh, height: '16px', width: '16px' });
    refresh.addEventListener('click', () => void this.refreshAll());
    this.line = h('div', { class: 'jp-crystal-line', role: 'status' });
    this.node.append(
      h('div', { class: 'jp-crystal-header' }, h('h2', {}, 'Crystal'), refresh),
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
    await Promise.all([this.sessions.refresh(), this.jobs.refresh(), this.prompts.refresh()]);
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
