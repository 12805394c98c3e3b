/**
 * A Crystal answer while it streams (crystal_kernel/jupyter/stream_html.py). The kernel
 * renders the Markdown so far with the function that renders the final answer
 * (markdown-it, raw HTML off, then its sanitizer: TRUST-1) and each live update of the
 * answer's output says how that HTML changed: `application/vnd.crystal.stream+json`
 * `{"at": N, "html": TAIL, "size": S, "crc": C}`, "keep the first N characters, append
 * TAIL; the result has S characters and CRC-32 C". JupyterLab keeps this renderer while
 * the updates keep this mime type. At the end the kernel empties this output and shows
 * the same HTML as a new `text/html` output right after it (live_outputs.py), which
 * JupyterLab's HTML renderer shows; handover.ts keeps this one on screen until that one
 * is in.
 *
 * So the person reads rendered Markdown (headings, code blocks, tables) while it
 * streams, and the end changes nothing on screen but what is new:
 *
 * - the HTML is shown as JupyterLab shows the final `text/html` (`renderHTML`, the same
 *   classes, JupyterLab's sanitizer on top when the output is not trusted), so the DOM
 *   it builds is the final one;
 * - only HTML the kernel's sanitizer produced is ever inserted: an update that does not
 *   rebuild exactly the kernel's string (size and CRC, e.g. a page that missed one)
 *   changes nothing, and the page waits for the next whole text (a reload) or the end;
 * - the answer's blocks that did not change stay in place (a text selection, the Copy
 *   buttons of its code blocks, typeset math); the ones after the first change are
 *   replaced.
 *
 * The kernel sends these updates only after this extension said it renders them
 * (`streamDeltas` when it opens the `crystal.live` comm, forms.ts).
 */
import { RenderedHTMLCommon, renderHTML } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';

export const STREAM_MIME = 'application/vnd.crystal.stream+json';

interface IUpdate {
  at?: unknown;
  html?: unknown;
  size?: unknown;
  crc?: unknown;
}

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) {
      c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    }
    table[n] = c >>> 0;
  }
  return table;
})();

/** CRC-32 (IEEE, as Python's zlib.crc32) of the UTF-8 bytes of `text`. */
export function crc32(text: string): number {
  const bytes = new TextEncoder().encode(text);
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) {
    c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  }
  return (c ^ 0xffffffff) >>> 0;
}

/** The kernel's HTML after `update`, or null when `shown` cannot be its base. */
export function applyUpdate(shown: string, update: IUpdate): string | null {
  const { at, html, size, crc } = update;
  if (typeof at !== 'number' || typeof html !== 'string' || typeof size !== 'number' || typeof crc !== 'number') {
    return null;
  }
  if (at < 0 || at > shown.length) {
    return null; // an update was missed
  }
  const next = shown.slice(0, at) + html;
  if (next.length !== size || crc32(next) !== crc) {
    return null;
  }
  return next;
}

/** What identifies a child node of the answer: its markup as the kernel sent it. */
function keyOf(node: ChildNode): string {
  return node instanceof Element ? node.outerHTML : `#${node.nodeType}:${node.textContent ?? ''}`;
}

/** The one element `parent` holds (whitespace aside), or null. */
function onlyElement(parent: ParentNode): Element | null {
  const nodes = Array.from(parent.childNodes).filter(
    n => !(n.nodeType === Node.TEXT_NODE && !(n.textContent ?? '').trim())
  );
  return nodes.length === 1 && nodes[0] instanceof Element ? nodes[0] : null;
}

class StreamedAnswer extends RenderedHTMLCommon {
  /** The HTML shown (the kernel's string, rebuilt). */
  private html = '';
  /** The answer's container (`div.crystal-answer`) as shown, its start tag, and the keys
   * and nodes of its children. */
  private box: Element | null = null;
  private boxKey = '';
  private keys: string[] = [];
  private nodes: ChildNode[] = [];
  private rendering: Promise<void> = Promise.resolve();

  constructor(options: IRenderMime.IRendererOptions) {
    super(options);
    this.addClass('jp-RenderedHTML');
    this.addClass('jp-crystal-streaming');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    return super.renderModel(model, true); // keep what is shown: render() updates it
  }

  render(model: IRenderMime.IMimeModel): Promise<void> {
    const next = applyUpdate(this.html, (model.data[STREAM_MIME] ?? {}) as IUpdate);
    if (next === null || next === this.html) {
      return this.rendering;
    }
    this.html = next;
    const trusted = model.trusted;
    this.rendering = this.rendering.then(() => this.paint(next, trusted)).catch(console.warn);
    return this.rendering;
  }

  /** Options for `renderHTML`, as JupyterLab's HTML renderer passes them. */
  private options(host: HTMLElement, source: string, trusted: boolean) {
    return {
      host,
      source,
      trusted,
      sanitizer: this.sanitizer,
      resolver: this.resolver,
      linkHandler: this.linkHandler,
      shouldTypeset: this.isAttached,
      latexTypesetter: this.latexTypesetter,
      translator: this.translator
    };
  }

  private async paint(html: string, trusted: boolean): Promise<void> {
    const source = trusted ? html : this.sanitizer.sanitize(html);
    // Parsed in a template: inert (nothing loads or runs), only to compare.
    const parsed = document.createElement('template');
    parsed.innerHTML = source;
    const box = onlyElement(parsed.content);
    const boxKey = box ? (box.cloneNode(false) as Element).outerHTML : '';
    if (!box || !this.box || boxKey !== this.boxKey || !this.node.contains(this.box)) {
      // The first update, or the container changed: render all of it.
      const done = renderHTML(this.options(this.node, source, trusted));
      this.box = onlyElement(this.node);
      this.boxKey = boxKey;
      this.keys = box ? Array.from(box.childNodes, keyOf) : [];
      this.nodes = this.box ? Array.from(this.box.childNodes) : [];
      return done;
    }
    const keys = Array.from(box.childNodes, keyOf);
    let same = 0;
    while (same < keys.length && same < this.keys.length && keys[same] === this.keys[same]) {
      same++;
    }
    // Everything after the last block kept goes (with the buttons answers.ts put
    // before a code block that goes).
    const last = same > 0 ? this.nodes[same - 1] : null;
    while (this.box.lastChild && this.box.lastChild !== last) {
      this.box.removeChild(this.box.lastChild);
    }
    const rest = document.createElement('template');
    rest.content.append(...Array.from(box.childNodes).slice(same));
    const fresh = document.createElement('div');
    // renderHTML fills `fresh` at once (its link handling finishes later, on the same
    // nodes): move them in now, so the page never shows the answer without them.
    const done = renderHTML({ ...this.options(fresh, rest.innerHTML, trusted), shouldTypeset: false });
    const added = Array.from(fresh.childNodes);
    this.box.append(...added);
    this.keys = keys;
    this.nodes = this.nodes.slice(0, same).concat(added);
    if (added.length !== keys.length - same) {
      this.box = null; // JupyterLab's sanitizer changed the blocks: render all next time
    }
    if (this.isAttached && this.latexTypesetter) {
      added.forEach(node => {
        if (node instanceof HTMLElement) {
          void this.latexTypesetter?.typeset(node);
        }
      });
    }
    return done;
  }
}

const extension: IRenderMime.IExtension = {
  id: 'crystal-kernel:stream',
  description: 'Shows a Crystal answer while it streams, rendered as its final HTML will be.',
  rendererFactory: {
    safe: true,
    mimeTypes: [STREAM_MIME],
    defaultRank: 0,
    createRenderer: options => new StreamedAnswer(options)
  },
  rank: 0,
  dataType: 'json'
};

export default extension;
