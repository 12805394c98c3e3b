/**
 * The three sections of the Crystal sidebar: Sessions, Jobs and Prompts. Each renders
 * itself from one API call and is refreshed by the sidebar's poll while it is visible.
 */
import { CrystalError, IAttachment, IJobRow, IPromptSet, NoSourceError, SourceGetter } from './api';
import { button, duration, h, when } from './dom';
import { sessionName } from './names';

/** What "unverified" means (the words of /sessions' legend, host/store.py). */
const UNVERIFIED_TITLE =
  'Not the last save this Crystal Home signed for this workspace and session (planted, edited, ' +
  'cut back, an older copy, copied or renamed from elsewhere, or saved before this version); ' +
  '/resume ID reads it as history, a bare /resume never picks it.';

export type Report = (message: string, error?: boolean) => void;

function errorText(error: unknown): string {
  return error instanceof CrystalError ? error.message : String(error);
}

export abstract class Section {
  readonly node: HTMLDetailsElement;
  protected readonly body: HTMLDivElement;
  protected readonly count: HTMLSpanElement;

  constructor(
    readonly name: string,
    protected report: Report,
    protected source: SourceGetter
  ) {
    this.body = h('div', { class: 'jp-crystal-section-body' });
    this.count = h('span', { class: 'jp-crystal-count' });
    this.node = h(
      'details',
      { class: `jp-crystal-section jp-crystal-section-${name.toLowerCase()}`, open: true },
      h('summary', {}, h('span', { class: 'jp-crystal-section-title' }, name), this.count),
      this.body
    );
  }

  get open(): boolean {
    return this.node.open;
  }

  async refresh(): Promise<void> {
    try {
      await this.load();
    } catch (error) {
      const kind = error instanceof NoSourceError ? 'jp-crystal-muted' : 'jp-crystal-error';
      this.count.textContent = '';
      this.body.replaceChildren(h('div', { class: kind }, errorText(error)));
    }
  }

  protected abstract load(): Promise<void>;

  /** Run an action, then refresh; its message (or error) goes to the sidebar's line. */
  protected async act(action: () => Promise<{ message?: string }>): Promise<void> {
    try {
      const result = await action();
      if (result && result.message) {
        this.report(result.message);
      }
    } catch (error) {
      this.report(errorText(error), true);
    }
    await this.refresh();
  }
}

export class SessionsSection extends Section {
  constructor(
    report: Report,
    source: SourceGetter,
    private openSession: (id: string) => void
  ) {
    super('Sessions', report, source);
  }

  protected async load(): Promise<void> {
    const { sessions } = await this.source().sessions();
    this.count.textContent = String(sessions.length);
    if (!sessions.length) {
      this.body.replaceChildren(
        h('div', { class: 'jp-crystal-muted' }, 'No sessions under this folder yet.')
      );
      return;
    }
    const list = h('ul', { class: 'jp-crystal-list' });
    for (const s of sessions) {
      const where = s.notebook
        ? s.notebook
        : s.workspace
          ? `${s.workspace}/ (no notebook)`
          : '(no notebook)';
      // Named by its topic, else its first prompt (quoted), else a short id (names.ts);
      // the id is in the tooltip.
      const title = sessionName(s.id, s.topic, s.prompt);
      const answered =
        s.answered === false
          ? h(
              'span',
              { class: 'jp-crystal-unanswered', title: 'Its last prompt got no reply (the request failed or was stopped)' },
              'not answered'
            )
          : h('span', { class: 'jp-crystal-answered', title: 'Its last prompt was answered' }, 'answered');
      // TRUST-7: a session this Crystal Home did not sign last (planted, edited, copied)
      // says so in the list, as /sessions does, before anyone opens or resumes it.
      const unverified =
        s.signed === false
          ? h(
              'span',
              { class: 'jp-crystal-unverified', style: 'font-weight:600', title: UNVERIFIED_TITLE },
              ' · unverified'
            )
          : null;
      const item = h(
        'li',
        { class: 'jp-crystal-session jp-crystal-clickable', title: `Open session ${s.id}`, 'data-id': s.id },
        h('div', { class: 'jp-crystal-row-title' }, title),
        h('div', { class: 'jp-crystal-session-notebook', title: 'The notebook that used this session last' }, where),
        h(
          'div',
          { class: 'jp-crystal-muted jp-crystal-session-stats' },
          `${when(s.updated)} · ${s.turns} turns · ${s.tokens} tokens · `,
          answered,
          unverified
        )
      );
      item.addEventListener('click', () => this.openSession(s.id));
      list.append(item);
    }
    this.body.replaceChildren(list);
  }
}

/** The live tail of one job's log, read by offset. Like a terminal's tail (and the
 * `/logs --follow` box, logs.ts) it shows the newest line, unless the person scrolled up
 * to read: then it stays where they left it until they scroll back down. */
class LogTail {
  readonly node = h('pre', { class: 'jp-crystal-log' });
  private next: number | undefined = undefined;
  private text = '';
  // Kept here, not read from the box: each refresh of the jobs list re-attaches the box,
  // which resets its scroll to the top (the box then stayed at the log's first lines).
  private following = true;
  private top = 0;
  static readonly MAX_CHARS = 64 * 1024; // bounded: the newest part only
  static readonly SLACK = 8; // px from the bottom that still counts as following

  constructor(
    readonly session: string,
    readonly job: string,
    private source: SourceGetter
  ) {
    this.node.addEventListener('scroll', () => {
      if (this.node.isConnected) {
        const box = this.node;
        this.following = box.scrollHeight - box.scrollTop - box.clientHeight <= LogTail.SLACK;
        this.top = box.scrollTop;
      }
    });
  }

  /** Put the box where it belongs: at its newest line, or where the person left it. */
  place(): void {
    this.node.scrollTop = this.following ? this.node.scrollHeight : this.top;
  }

  async poll(): Promise<string> {
    const chunk = await this.source().log(this.session, this.job, this.next);
    if (this.next === undefined && chunk.offset > 0) {
      this.text = '';
    }
    if (chunk.dropped > 0) {
      this.text += `\n[… ${chunk.dropped} bytes no longer kept …]\n`;
    }
    this.text += chunk.text;
    if (this.text.length > LogTail.MAX_CHARS) {
      this.text = this.text.slice(this.text.length - LogTail.MAX_CHARS);
    }
    this.next = chunk.next;
    this.node.textContent = this.text || '(no output yet)';
    this.place();
    return chunk.state;
  }
}

export class JobsSection extends Section {
  private tails = new Map<string, LogTail>();
  private rows: IJobRow[] = [];

  constructor(report: Report, source: SourceGetter) {
    super('Jobs', report, source);
  }

  /** Poll the open log tails (called more often than refresh). */
  async pollLogs(): Promise<void> {
    for (const tail of this.tails.values()) {
      try {
        await tail.poll();
      } catch (error) {
        tail.node.textContent = errorText(error);
      }
    }
  }

  protected async load(): Promise<void> {
    const { jobs } = await this.source().jobs();
    this.rows = jobs;
    const running = jobs.filter(j => j.state === 'running').length;
    this.count.textContent = running ? `${running} running` : String(jobs.length);
    if (!jobs.length) {
      this.tails.clear();
      this.body.replaceChildren(
        h('div', { class: 'jp-crystal-muted' }, 'No background jobs. The agent starts them with bash_start.')
      );
      return;
    }
    const list = h('ul', { class: 'jp-crystal-list' });
    for (const job of jobs) {
      list.append(this.renderJob(job));
    }
    this.body.replaceChildren(list);
    this.tails.forEach(tail => tail.place()); // re-attached: put back before the next poll
    await this.pollLogs();
  }

  private key(job: IJobRow): string {
    return `${job.session}/${job.id}`;
  }

  private renderJob(job: IJobRow): HTMLElement {
    const key = this.key(job);
    const ending =
      job.state === 'running' ? '' : job.signal ? ` (${job.signal})` : job.exitCode !== null ? ` (exit ${job.exitCode})` : '';
    const state = h('span', { class: `jp-crystal-state jp-crystal-state-${job.state.replace(/\s+/g, '-')}` }, job.state + ending);
    const actions = h('span', { class: 'jp-crystal-actions' });
    const logButton = button(this.tails.has(key) ? 'Hide log' : 'Log', 'Show the live log tail', () => {
      if (this.tails.has(key)) {
        this.tails.delete(key);
      } else {
        this.tails.set(key, new LogTail(job.session, job.id, this.source));
      }
      void this.refresh();
    }, 'jp-crystal-log-toggle');
    actions.append(logButton);
    if (job.stoppable) {
      actions.append(
        button('Stop', `Stop job ${job.id} and everything it started`, () => {
          void this.act(() => this.source().stop(job.session, job.id));
        }, 'jp-crystal-stop jp-mod-warn')
      );
    }
    const item = h(
      'li',
      { class: 'jp-crystal-job', 'data-id': job.id, 'data-session': job.session, 'data-state': job.state },
      h(
        'div',
        { class: 'jp-crystal-row-head' },
        h('span', { class: 'jp-crystal-job-id' }, job.id),
        state,
        h('span', { class: 'jp-crystal-muted' }, duration(job.runtime)),
        actions
      ),
      h('code', { class: 'jp-crystal-command', title: job.command }, job.command),
      h(
        'div',
        { class: 'jp-crystal-job-session jp-crystal-muted', title: `Session ${job.session}` },
        `${job.id} of ${sessionName(job.session, job.sessionTopic)}` + (job.notebook ? ` · ${job.notebook}` : '')
      )
    );
    const tail = this.tails.get(key);
    if (tail) {
      item.append(tail.node);
    }
    return item;
  }

  get jobs(): IJobRow[] {
    return this.rows;
  }
}

export class PromptsSection extends Section {
  constructor(
    report: Report,
    source: SourceGetter,
    private changed: () => void = () => undefined
  ) {
    super('Prompts', report, source);
  }

  protected async act(action: () => Promise<{ message?: string }>): Promise<void> {
    await super.act(action);
    this.changed(); // the status bar shows the prompt set: let it ask the kernel again
  }

  protected async load(): Promise<void> {
    const source = this.source();
    const [sets, attachments] = await Promise.all([source.promptSets(), source.attachments()]);
    this.count.textContent = sets.selected;
    const setList = h('ul', { class: 'jp-crystal-list jp-crystal-promptsets' });
    setList.append(
      this.setRow(
        { name: 'default', title: 'Built-in prompts', description: '', enabled: sets.selected === 'default' },
        sets.selected
      )
    );
    for (const set of sets.sets) {
      setList.append(this.setRow(set, sets.selected));
    }
    const attachList = h('ul', { class: 'jp-crystal-list jp-crystal-attachments' });
    const enabled = attachments.attachments.filter(a => a.enabled);
    for (const a of attachments.attachments) {
      attachList.append(this.attachmentRow(a, enabled));
    }
    if (!attachments.attachments.length) {
      attachList.append(
        h('li', { class: 'jp-crystal-muted' }, 'No attachments (folders with prompt.json in ~/.crystal/prompt-attachments/ or .crystal/prompt-attachments/).')
      );
    }
    const notes = [...sets.notes, ...attachments.notes].map(n => h('div', { class: 'jp-crystal-note' }, n));
    this.body.replaceChildren(
      h('div', { class: 'jp-crystal-subtitle' }, 'Prompt set'),
      setList,
      h('div', { class: 'jp-crystal-subtitle' }, 'Attachments'),
      attachList,
      ...notes
    );
  }

  private setRow(set: IPromptSet, selected: string): HTMLElement {
    const isSelected = set.name === selected;
    const actions = h('span', { class: 'jp-crystal-actions' });
    if (isSelected && set.name !== 'default') {
      actions.append(
        button('Disable', 'Go back to the built-in prompts', () => {
          void this.act(() => this.source().promptSetAction('disable', set.name));
        }, 'jp-crystal-disable')
      );
    } else if (!isSelected) {
      actions.append(
        button('Enable', `Use prompt set ${set.name} (disables any other)`, () => {
          void this.act(() =>
            set.name === 'default' ? this.source().promptSetAction('disable') : this.source().promptSetAction('enable', set.name)
          );
        }, 'jp-crystal-enable')
      );
    }
    return h(
      'li',
      {
        class: `jp-crystal-promptset ${isSelected ? 'jp-mod-selected' : ''}`.trim(),
        'data-name': set.name,
        title: set.description || set.title
      },
      h(
        'div',
        { class: 'jp-crystal-row-head' },
        h('span', { class: 'jp-crystal-radio' }, isSelected ? '●' : '○'),
        h('span', { class: 'jp-crystal-row-title' }, set.name),
        h('span', { class: 'jp-crystal-muted jp-crystal-grow' }, set.title !== set.name ? set.title : ''),
        actions
      )
    );
  }

  private attachmentRow(a: IAttachment, enabled: IAttachment[]): HTMLElement {
    const index = enabled.indexOf(a);
    const toggle = h('input', { type: 'checkbox', class: 'jp-crystal-attach-toggle', title: a.enabled ? 'Disable' : 'Enable' }) as HTMLInputElement;
    toggle.checked = a.enabled;
    toggle.addEventListener('change', () => {
      void this.act(() => this.source().attachmentAction(a.enabled ? 'disable' : 'enable', a.name));
    });
    const actions = h('span', { class: 'jp-crystal-actions' });
    if (a.enabled) {
      const up = button('▲', 'Move up', () => void this.act(() => this.source().attachmentAction('up', a.name)), 'jp-crystal-up');
      const down = button('▼', 'Move down', () => void this.act(() => this.source().attachmentAction('down', a.name)), 'jp-crystal-down');
      up.disabled = index <= 0;
      down.disabled = index === enabled.length - 1;
      actions.append(up, down);
    }
    return h(
      'li',
      { class: 'jp-crystal-attachment', 'data-name': a.name, title: a.description || a.title },
      h(
        'div',
        { class: 'jp-crystal-row-head' },
        toggle,
        h('span', { class: 'jp-crystal-row-title' }, a.position ? `${a.position}. ${a.name}` : a.name),
        h('span', { class: 'jp-crystal-badge' }, a.source),
        h('span', { class: 'jp-crystal-muted jp-crystal-grow' }, a.modes.join(', ')),
        actions
      )
    );
  }
}
