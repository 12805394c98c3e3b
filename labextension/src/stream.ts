/**
 * A Crystal answer while it streams (crystal_kernel/jupyter/render.py, `_Stream` with
 * deltas): each live update of the answer's output carries only the text appended since
 * the previous one, as `application/vnd.crystal.stream+json` `{"at": offset, "text":
 * appended}` (`at` 0: the whole text so far, e.g. after a page reload). JupyterLab keeps
 * this renderer while the updates keep this mime type, so the text is appended here; the
 * kernel's final update is the sanitized HTML rendering, which replaces this renderer.
 *
 * The text is shown as plain text (a text node, white-space: pre-wrap): model text is
 * never handed to an HTML or Markdown renderer here (TRUST-1). The kernel sends these
 * updates only after this extension said it renders them (`streamDeltas` when it opens
 * the `crystal.live` comm, forms.ts).
 */
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

export const STREAM_MIME = 'application/vnd.crystal.stream+json';

interface IDelta {
  at?: unknown;
  text?: unknown;
}

class StreamedAnswer extends Widget implements IRenderMime.IRenderer {
  /** The kernel's offset after the last piece shown. */
  private end = 0;

  constructor() {
    super();
    this.addClass('jp-crystal-streaming');
    this.node.style.whiteSpace = 'pre-wrap';
    this.node.style.overflowWrap = 'anywhere';
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const delta = (model.data[STREAM_MIME] ?? {}) as IDelta;
    const at = typeof delta.at === 'number' ? delta.at : 0;
    const text = typeof delta.text === 'string' ? delta.text : '';
    if (at === 0) {
      this.node.textContent = text;
    } else if (at === this.end) {
      this.node.appendChild(document.createTextNode(text));
    } else if (at > this.end) {
      // A piece was missed (this page joined mid-stream): say so; the final update
      // shows the whole answer.
      this.node.appendChild(document.createTextNode(' … ' + text));
    } else {
      return Promise.resolve(); // already shown
    }
    this.end = at + text.length;
    return Promise.resolve();
  }
}

const extension: IRenderMime.IExtension = {
  id: 'crystal-kernel:stream',
  description: 'Shows a Crystal answer while it streams, by appending the new text.',
  rendererFactory: {
    safe: true,
    mimeTypes: [STREAM_MIME],
    defaultRank: 0,
    createRenderer: () => new StreamedAnswer()
  },
  rank: 0,
  dataType: 'json'
};

export default extension;
