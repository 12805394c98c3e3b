/** A main-area view of one session's transcript (read only), from the source the
 * sidebar used when it was opened (the server, or a remote kernel). */
import { Sanitizer } from '@jupyterlab/apputils';
import { Widget } from '@lumino/widgets';

import { CrystalError, IMessage, IPart, ISource, ITranscript } from './api';
import { h, when } from './dom';
import { sessionName } from './names';

export class TranscriptView extends Widget {
  constructor(
    readonly sessionId: string,
    private source: ISource
  ) {
    super();
    this.addClass('jp-crystal-transcript');
    this.id = `crystal-transcript-${sessionId}`;
    this.title.label = sessionName(sessionId); // the sidebar's name for it (names.ts)
    this.title.caption = `Crystal session ${sessionId}`;
    this.title.closable = true;
    void this.load();
  }

  async load(): Promise<void> {
    this.node.replaceChildren(h('div', { class: 'jp-crystal-muted' }, 'Loading…'));
    try {
      this.render(await this.source.transcript(this.sessionId));
    } catch (error) {
      const message = error instanceof CrystalError ? error.message : String(error);
      this.node.replaceChildren(h('div', { class: 'jp-crystal-error' }, message));
    }
  }

  private render(data: ITranscript): void {
    const name = sessionName(data.id, data.topic);
    this.title.label = name;
    this.title.caption = `Crystal session ${data.id}`;
    const facts = [
      data.mode,
      data.approval,
      data.provider && data.model ? `${data.provider}:${data.model}` : data.model,
      `${data.turns} turns`,
      `${data.tokens} tokens`,
      when(data.updated)
    ].filter(Boolean);
    const header = h(
      'div',
      { class: 'jp-crystal-transcript-header' },
      h('h2', {}, name),
      h('div', { class: 'jp-crystal-muted' }, `${data.id} · ${facts.join(' · ')}`)
    );
    const body = h('div', { class: 'jp-crystal-messages' });
    if (data.droppedMessages > 0) {
      body.append(
        h('div', { class: 'jp-crystal-muted' }, `${data.droppedMessages} older messages not shown.`)
      );
    }
    for (const message of data.messages) {
      body.append(renderMessage(message));
    }
    if (!data.messages.length) {
      body.append(h('div', { class: 'jp-crystal-muted' }, 'This session has no messages yet.'));
    }
    this.node.replaceChildren(header, body);
  }
}

const sanitizer = new Sanitizer();

/**
 * A text part as Markdown (TRUST-1). The server renders it with the kernel's own
 * renderer and cleans it with nh3 (`html`); it is cleaned again here by JupyterLab's
 * sanitizer before it reaches the page. Without `html`, the text goes in as text.
 */
function markdownPart(part: IPart): HTMLElement {
  const node = h('div', { class: 'jp-crystal-text jp-RenderedHTMLCommon' });
  if (part.html) {
    node.innerHTML = sanitizer.sanitize(part.html);
  } else {
    node.textContent = part.text || '';
  }
  return node;
}

function renderMessage(message: IMessage): HTMLElement {
  const isResults = message.parts.every(p => p.kind === 'tool_result');
  const role = message.summary ? 'summary' : isResults ? 'tool' : message.role;
  const node = h('div', { class: `jp-crystal-message jp-crystal-role-${role}` });
  node.append(h('div', { class: 'jp-crystal-role' }, role === 'tool' ? 'tool results' : role));
  for (const part of message.parts) {
    if (part.kind === 'text') {
      node.append(markdownPart(part));
    } else if (part.kind === 'image') {
      node.append(h('div', { class: 'jp-crystal-muted' }, `[image ${part.mimeType}]`));
    } else if (part.kind === 'tool_call') {
      node.append(
        h(
          'div',
          { class: 'jp-crystal-call' },
          h('span', { class: 'jp-crystal-tool' }, part.name || ''),
          h('code', {}, part.arguments || '')
        )
      );
    } else if (part.kind === 'tool_result') {
      node.append(
        h(
          'div',
          { class: `jp-crystal-result ${part.ok ? '' : 'jp-crystal-failed'}`.trim() },
          h('span', { class: 'jp-crystal-tool' }, `${part.name} ${part.ok ? '✓' : '✗'}`),
          h('pre', {}, part.text || '')
        )
      );
    }
  }
  if (message.interrupted) {
    node.append(h('div', { class: 'jp-crystal-muted' }, '(interrupted)'));
  }
  return node;
}
