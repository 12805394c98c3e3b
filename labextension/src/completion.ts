/**
 * NB-2: inline completions (ghost text) from Crystal in every notebook and file editor,
 * through JupyterLab's inline completer (4.1+): Tab accepts, the next keystroke drops it.
 *
 * The model call happens on the server (crystal_kernel/jupyter/server/completion.py), with
 * the person's own Crystal settings and key; this page sends only the text around the
 * cursor, the code cells above it (bounded) and, where the kernel is Crystal's or has
 * Crystal's magics loaded, a short listing of the kernel's variables. The answer streams
 * back as JSON lines and grows the ghost text piece by piece.
 *
 * Each keystroke aborts the request in flight (the server then stops the model request)
 * and waits a moment for the person to pause before asking again.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import {
  CompletionHandler,
  ICompletionProviderManager,
  IInlineCompletionContext,
  IInlineCompletionItem,
  IInlineCompletionList,
  IInlineCompletionProvider
} from '@jupyterlab/completer';
import { URLExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage, ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

import { isCrystalKernel } from './kernelspec';

/** Wait this long after a keystroke before asking (a person pausing, not typing on). */
const PAUSE_MS = 250;
// How long JupyterLab waits for the first piece: the server's own limit and a margin.
const FIRST_ANSWER_TIMEOUT_MS = 22000;
/** The cells above that go along, nearest first, and their characters in all. */
const MAX_CELLS = 10;
const MAX_CELLS_CHARS = 6000;
const MAX_PREFIX = 6000;
const MAX_SUFFIX = 2000;
/** The kernel's variables: asked at most this often, and waited for this long. */
const VARIABLES_TTL_MS = 5000;
const VARIABLES_WAIT_MS = 800;
/** After the server says completions are off, ask again only after this long. */
const OFF_RETRY_MS = 30000;

/** A silent user expression: the variables listing, only where Crystal is in the kernel
 * (a Crystal kernel, or a Python kernel with `%load_ext crystal_kernel`); elsewhere "". */
const VARIABLES_EXPRESSION =
  "__import__('crystal_kernel.jupyter.server.completion_context', fromlist=['_']).variables_listing() " +
  "if any(m in __import__('sys').modules for m in ('crystal_kernel.jupyter.kernel', 'crystal_kernel.jupyter.magics')) " +
  "else ''";

interface IStreamState {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  decoder: TextDecoder;
  buffer: string;
  text: string;
  signal: AbortSignal;
}

function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise(resolve => {
    if (signal.aborted) {
      resolve(false);
      return;
    }
    const timer = window.setTimeout(() => resolve(true), ms);
    signal.addEventListener('abort', () => {
      window.clearTimeout(timer);
      resolve(false);
    });
  });
}

/** The text of a `text/plain` user expression result: a Python string's repr. */
function plainText(result: unknown): string {
  const data = (result as { status?: string; data?: Record<string, unknown> }) || {};
  if (data.status !== 'ok' || !data.data) {
    return '';
  }
  const text = data.data['text/plain'];
  // '' is the repr of the empty string a kernel without Crystal answers.
  return typeof text === 'string' && text !== "''" ? text : '';
}

/** The code cells above the active one in a notebook (nearest last), bounded. */
function cellsAbove(widget: Widget): string[] {
  if (!(widget instanceof NotebookPanel)) {
    return [];
  }
  const notebook = widget.content;
  const active = notebook.activeCellIndex;
  const sources: string[] = [];
  let budget = MAX_CELLS_CHARS;
  for (let i = active - 1; i >= 0 && sources.length < MAX_CELLS && budget > 0; i--) {
    const cell = notebook.widgets[i];
    if (!cell || cell.model.type !== 'code') {
      continue;
    }
    let source = cell.model.sharedModel.getSource();
    if (!source.trim()) {
      continue;
    }
    if (source.length > budget) {
      source = source.slice(source.length - budget);
    }
    sources.unshift(source);
    budget -= source.length;
  }
  return sources;
}

function documentPath(widget: Widget): string {
  const context = (widget as unknown as { context?: { path?: string } }).context;
  return context && typeof context.path === 'string' ? context.path : '';
}

function languageOf(mimeType: string | undefined): string {
  const mime = (mimeType || '').toLowerCase();
  if (!mime || mime.includes('python')) {
    return 'python';
  }
  const match = /^text\/(?:x-)?([\w+-]+)/.exec(mime);
  return match ? match[1] : mime;
}

export class CrystalInlineProvider implements IInlineCompletionProvider {
  readonly identifier = 'crystal-kernel:inline';
  readonly name = 'Crystal';
  /**
   * JupyterLab drops a provider's answer after its `timeout` (5 s unless the provider
   * says otherwise). Crystal's first answer includes the server's first model request
   * (its SDK is imported then) and the kernel's variables; on a busy machine that took
   * longer than 5 s and the ghost text never came. The server gives the first piece
   * FIRST_PIECE_TIMEOUT (20 s, server/completion.py); the page waits as long, and a
   * keystroke still aborts the wait at once.
   */
  readonly schema = {
    default: { timeout: FIRST_ANSWER_TIMEOUT_MS }
  };

  private _controller: AbortController | null = null;
  private _streams = new Map<string, IStreamState>();
  private _next = 0;
  private _offUntil = 0;
  private _variables = new Map<string, { at: number; text: Promise<string> }>();
  private _watched = new WeakSet<Kernel.IKernelConnection>();
  private _warned = new Set<string>();

  async fetch(
    request: CompletionHandler.IRequest,
    context: IInlineCompletionContext
  ): Promise<IInlineCompletionList> {
    // The next keystroke: the request in flight is aborted, which closes its connection
    // and so stops the model request on the server too.
    this._controller?.abort();
    this._streams.clear();
    const controller = new AbortController();
    this._controller = controller;
    if (Date.now() < this._offUntil) {
      return { items: [] };
    }
    // Asked at the keystroke, not after the pause: the kernel answers while the person
    // pauses (one question for the keystrokes of one pause: the answer is shared).
    const variables = this._kernelVariables(context.session?.kernel ?? null);
    if (!(await sleep(PAUSE_MS, controller.signal))) {
      return { items: [] };
    }
    const body = {
      prefix: request.text.slice(Math.max(0, request.offset - MAX_PREFIX), request.offset),
      suffix: request.text.slice(request.offset, request.offset + MAX_SUFFIX),
      language: languageOf(request.mimeType),
      cellsAbove: cellsAbove(context.widget),
      variables: await Promise.race([
        variables,
        new Promise<string>(resolve => window.setTimeout(() => resolve(''), VARIABLES_WAIT_MS))
      ]),
      path: documentPath(context.widget)
    };
    if (controller.signal.aborted) {
      return { items: [] };
    }
    const settings = ServerConnection.makeSettings();
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(
        URLExt.join(settings.baseUrl, 'crystal', 'api', 'completion'),
        { method: 'POST', body: JSON.stringify(body), signal: controller.signal },
        settings
      );
    } catch {
      return { items: [] }; // aborted, or the server is gone
    }
    if (!response.ok || !response.body) {
      let message = `the server answered ${response.status}`;
      try {
        message = ((await response.json()) as { error?: string }).error || message;
      } catch {
        // not JSON: keep the status
      }
      this._warnOnce(`Crystal inline completion: ${message}`);
      return { items: [] };
    }
    const state: IStreamState = {
      reader: response.body.getReader(),
      decoder: new TextDecoder(),
      buffer: '',
      text: '',
      signal: controller.signal
    };
    // Wait for the first piece: ghost text starts with something to show.
    for (;;) {
      const line = await this._nextLine(state);
      if (line === null || line.done || line.error) {
        if (line?.error) {
          this._warnOnce(`Crystal inline completion: ${line.error}`);
        }
        return state.text ? { items: [{ insertText: state.text }] } : { items: [] };
      }
      if (typeof line.off === 'string') {
        this._offUntil = Date.now() + OFF_RETRY_MS;
        return { items: [] };
      }
      if (typeof line.text === 'string' && line.text) {
        state.text += line.text;
        const token = `crystal-${++this._next}`;
        this._streams.set(token, state);
        return { items: [{ insertText: state.text, isIncomplete: true, token }] };
      }
    }
  }

  async *stream(token: string): AsyncGenerator<{ response: IInlineCompletionItem }, undefined, unknown> {
    const state = this._streams.get(token);
    if (!state) {
      return;
    }
    try {
      for (;;) {
        const line = await this._nextLine(state);
        if (line === null || line.done) {
          break;
        }
        if (line.error) {
          yield { response: { insertText: state.text, isIncomplete: false, error: { message: line.error } } };
          break;
        }
        if (typeof line.text === 'string' && line.text) {
          state.text += line.text;
          yield { response: { insertText: state.text, isIncomplete: true } };
        }
      }
    } finally {
      this._streams.delete(token);
    }
    yield { response: { insertText: state.text, isIncomplete: false } };
    return;
  }

  /** The next JSON line of the reply; null at its end or when the request was aborted. */
  private async _nextLine(
    state: IStreamState
  ): Promise<{ text?: string; done?: boolean; error?: string; off?: string } | null> {
    for (;;) {
      const newline = state.buffer.indexOf('\n');
      if (newline >= 0) {
        const line = state.buffer.slice(0, newline).trim();
        state.buffer = state.buffer.slice(newline + 1);
        if (!line) {
          continue;
        }
        try {
          return JSON.parse(line);
        } catch {
          return null;
        }
      }
      if (state.signal.aborted) {
        return null;
      }
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await state.reader.read();
      } catch {
        return null; // aborted by the next keystroke
      }
      if (chunk.done) {
        return null;
      }
      state.buffer += state.decoder.decode(chunk.value, { stream: true });
    }
  }

  /** The kernel's variables where Crystal is in it (a silent user expression), asked at
   * most once per VARIABLES_TTL_MS: the answer (or the question still in flight) is
   * shared, so a reply that comes after a request stopped waiting serves the next one. */
  private _kernelVariables(kernel: Kernel.IKernelConnection | null): Promise<string> {
    if (!kernel) {
      return Promise.resolve('');
    }
    // The cache first: a keystroke's own question makes the kernel busy until it answers.
    const cached = this._variables.get(kernel.id);
    if (cached && Date.now() - cached.at < VARIABLES_TTL_MS) {
      return cached.text;
    }
    if (kernel.status !== 'idle') {
      return Promise.resolve(''); // running the person's code: not asked now
    }
    this._forgetOnRun(kernel);
    const text = this._askVariables(kernel);
    this._variables.set(kernel.id, { at: Date.now(), text });
    return text;
  }

  /** The person's code changes the variables: the kernel's answer is kept only until
   * the kernel runs the next cell (an ``execute_input``; the silent question makes none). */
  private _forgetOnRun(kernel: Kernel.IKernelConnection): void {
    if (this._watched.has(kernel)) {
      return;
    }
    this._watched.add(kernel);
    kernel.iopubMessage.connect((_, msg) => {
      if (msg.header.msg_type === 'execute_input') {
        this._variables.delete(kernel.id);
      }
    });
  }

  private async _askVariables(kernel: Kernel.IKernelConnection): Promise<string> {
    if (!(isCrystalKernel(kernel.name) || (await this._isPython(kernel)))) {
      return '';
    }
    try {
      const future = kernel.requestExecute(
        { code: '', silent: true, store_history: false, user_expressions: { crystal: VARIABLES_EXPRESSION } },
        true
      );
      const reply = (await future.done) as KernelMessage.IExecuteReplyMsg;
      const content = reply?.content;
      return content && content.status === 'ok' ? plainText(content.user_expressions['crystal']) : '';
    } catch {
      return '';
    }
  }

  private async _isPython(kernel: Kernel.IKernelConnection): Promise<boolean> {
    try {
      const spec = await kernel.spec;
      return (spec?.language || '').toLowerCase() === 'python';
    } catch {
      return false;
    }
  }

  private _warnOnce(message: string): void {
    if (!this._warned.has(message)) {
      this._warned.add(message);
      console.warn(message);
    }
  }
}

/** Register Crystal's inline completion provider with JupyterLab's completer. */
export async function activateCompletion(app: JupyterFrontEnd): Promise<void> {
  const manager = await app.resolveOptionalService(ICompletionProviderManager);
  if (manager) {
    manager.registerInlineProvider(new CrystalInlineProvider());
  }
}
