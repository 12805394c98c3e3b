"""TRUST-1: the one way untrusted text becomes HTML in a notebook.

Kernel output is *trusted* by JupyterLab: HTML or Markdown a kernel sends is inserted
as is, so an ``<img onerror=…>`` in a model's answer would run JavaScript with the
person's server token (contents and kernels APIs). Every bundle Crystal shows therefore
goes through :func:`clean` (the ``nh3`` binding of the Rust sanitizer *ammonia*) with an
allowlist of tags, attributes, CSS properties and URL schemes, and model text is never
sent as ``text/markdown``: :func:`markdown_html` renders it here (markdown-it, raw HTML
off, so ``<script>`` shows as text) and cleans the result.

What survives: paragraphs, emphasis, lists, tables, block quotes, headings, code spans
and fenced code blocks, links to ``http``, ``https`` and ``mailto`` URLs (and relative
ones) and the inline styles the cards use. What does not: scripts, event handlers,
``style`` elements, iframes, forms, SVG, remote images (a Markdown image becomes a link,
so an answer cannot make the browser fetch a URL by being shown), ``javascript:`` and
``data:`` URLs.

Math: ``$`` is literal unless it is clearly math. Every container Crystal
emits carries the MathJax ignore classes; only these spans are typeset:

- ``$$ … $$`` (display math, may span lines);
- ``$…$`` when the opening ``$`` is not preceded by a letter, digit or ``$`` and is
  followed by a non-space, and the closing ``$`` follows a non-space and is not
  followed by a letter, digit or ``$`` — so ``$x^2$`` is math while ``$12k``,
  ``$VAR``, ``$(date)``, ``$PATH/$HOME`` and "costs $5 and $10" stay literal.
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import nh3

from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.highlight import highlighted_html

if TYPE_CHECKING:
    from markdown_it.token import Token

#: On every container: MathJax (2 and 3, lab and static exports) skips its text.
NO_MATH = "tex2jax_ignore mathjax_ignore"
#: On a span or div inside a NO_MATH container that *is* math.
MATH = "tex2jax_process mathjax_process crystal-math"

TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s", "samp", "small", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
})
ATTRIBUTES = {
    "*": {"class", "style", "title", "data-tool", "data-state", "data-job", "data-crystal", "data-lang"},
    "a": {"href"},
    "ol": {"start"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
    "details": {"open"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
#: CSS the cards use; anything else in a style attribute is dropped (no ``background``
#: shorthand, so no url() that fetches; no
#: position tricks that could lay a fake form over the page).
STYLE_PROPERTIES = frozenset({
    "background-color", "border", "border-bottom", "border-left", "border-radius", "border-top",
    "color", "display", "font-family", "font-size", "font-style", "font-weight", "margin", "margin-left",
    "margin-top", "margin-bottom", "max-height", "max-width", "opacity", "overflow", "overflow-x", "padding",
    "text-align", "vertical-align", "white-space", "word-break", "overflow-wrap", "width",
})


def clean(fragment: str) -> str:
    """Sanitize an HTML fragment for a notebook output (TRUST-1). Idempotent."""
    return nh3.clean(fragment, tags=set(TAGS), attributes={k: set(v) for k, v in ATTRIBUTES.items()},
                     url_schemes=set(URL_SCHEMES), filter_style_properties=set(STYLE_PROPERTIES),
                     link_rel="noopener noreferrer nofollow", strip_comments=True)


def esc(text: Any) -> str:
    """Escape text for HTML (quotes too: safe in attributes)."""
    return _html.escape(str(text), quote=True)


def html_bundle(plain: str, fragment: str) -> dict[str, str]:
    """A ``text/plain`` + cleaned ``text/html`` bundle: the only way bundles are made."""
    return {"text/plain": plain, "text/html": clean(fragment)}


# ----- Markdown -----------------------------------------------------------------------------------
_OPEN_OK = re.compile(r"\S")
_WORDISH = re.compile(r"[0-9A-Za-z$\\]")


def _math_inline(state: Any, silent: bool) -> bool:
    """``$…$`` and one-line ``$$…$$`` by the rule in the module docstring."""
    src, pos = state.src, state.pos
    if src[pos] != "$":
        return False
    double = src.startswith("$$", pos)
    if double:
        end = src.find("$$", pos + 2)
        if end < 0 or end == pos + 2:
            return False
        if not silent:
            token = state.push("math_block_inline", "", 0)
            token.content = src[pos + 2:end]
        state.pos = end + 2
        return True
    if pos > 0 and _WORDISH.match(src[pos - 1]):
        return False
    if pos + 1 >= len(src) or not _OPEN_OK.match(src[pos + 1]):
        return False
    end = pos + 1
    while True:
        end = src.find("$", end)
        if end < 0:
            return False
        if src[end - 1] == "\\":
            end += 1
            continue
        break
    content = src[pos + 1:end]
    if not content or "\n" in content or content[-1].isspace():
        return False
    if end + 1 < len(src) and _WORDISH.match(src[end + 1]):
        return False
    if not silent:
        token = state.push("math_inline", "", 0)
        token.content = content
    state.pos = end + 1
    return True


def _math_block(state: Any, start: int, end: int, silent: bool) -> bool:
    """A ``$$`` line opening display math that ends at a line ending in ``$$``."""
    begin = state.bMarks[start] + state.tShift[start]
    first = state.src[begin:state.eMarks[start]]
    if not first.startswith("$$"):
        return False
    rest = first[2:]
    if rest.rstrip().endswith("$$") and len(rest.rstrip()) > 2:
        body, last = rest.rstrip()[:-2], start
    else:
        lines = [rest]
        last = start + 1
        while last < end:
            text = state.src[state.bMarks[last] + state.tShift[last]:state.eMarks[last]]
            if text.rstrip().endswith("$$"):
                lines.append(text.rstrip()[:-2])
                break
            lines.append(text)
            last += 1
        else:
            return False
        body = "\n".join(lines)
    if silent:
        return True
    token = state.push("math_block", "div", 0)
    token.content = body.strip()
    token.map = [start, last + 1]
    state.line = last + 1
    return True


def _image_as_link(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    # A shown answer must not make the browser fetch a URL (exfiltration by image).
    token = tokens[idx]
    alt = renderer.renderInlineAsText(token.children or [], options, env) or "image"
    src = token.attrGet("src") or ""
    return f'<a href="{esc(src)}">[image: {esc(alt)}]</a>'


# A code block reads as one in JupyterLab (either theme) and in a static export, and keeps
# its distance from the paragraph after it.
_CODE_STYLE = (f"background-color:{palette.CODE_BG};color:{palette.TEXT};border:1px solid var(--jp-border-color2,#d0d7de);"
               "padding:6px 8px;margin:0.5em 0 1em 0;border-radius:4px;overflow-x:auto")


def _fence(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    lang = (token.info or "").strip().split(" ")[0][:40]
    lang_attr = f' data-lang="{esc(lang)}"' if lang else ""
    return (f'<pre class="crystal-code"{lang_attr} style="{_CODE_STYLE}">'
            f'<code style="background-color:transparent;color:inherit">{highlighted_html(token.content, lang)}</code>'
            "</pre>\n")


def _left_aligned_cells(state: Any) -> None:
    """Table cells without an alignment of their own read left to right, as JupyterLab's
    Markdown tables do (its HTML output styles right-align them, for data frames)."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and not token.attrGet("style"):
            token.attrSet("style", "text-align:left")


@lru_cache(maxsize=1)
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("escape", "crystal_math", _math_inline)
    md.block.ruler.before("fence", "crystal_math_block", _math_block,
                          {"alt": ["paragraph", "reference", "blockquote", "list"]})
    md.add_render_rule("math_inline", lambda r, t, i, o, e: f'<span class="{MATH}">${esc(t[i].content)}$</span>')
    md.add_render_rule("math_block_inline",
                       lambda r, t, i, o, e: f'<span class="{MATH}">$${esc(t[i].content)}$$</span>')
    md.add_render_rule("math_block", lambda r, t, i, o, e: f'<div class="{MATH}">$${esc(t[i].content)}$$</div>\n')
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _fence)
    md.core.ruler.push("crystal_table_align", _left_aligned_cells)
    return md


def markdown_html(text: str) -> str:
    """Model (or tool, or file) Markdown as sanitized HTML, math only where it is math."""
    return clean(f'<div class="crystal-answer {NO_MATH}">{_markdown().render(text)}</div>')


def inline_markdown_html(text: str) -> str:
    """One line of Markdown (code spans, emphasis, links) as sanitized inline HTML, for
    text the model writes into a form or a card: a question, an option's description."""
    return clean(_markdown().renderInline(text))


def markdown_bundle(text: str) -> dict[str, str]:
    """An answer as an output bundle: the cleaned HTML and the raw text. No
    ``text/markdown``: a front that renders it would trust whatever HTML it holds."""
    return {"text/plain": text, "text/html": markdown_html(text)}


#: An answer longer than this keeps only a preview in ``text/plain`` in :func:`html_answer_bundle`.
PREVIEW_CHARS = 200


def html_answer_bundle(text: str) -> dict[str, str]:
    """An answer for a front that shows HTML (JupyterLab with Crystal's extension): the
    same cleaned HTML as :func:`markdown_bundle`, and, for a long answer, a ``text/plain``
    that is a short preview ending with ``ANSWER_IN_HTML`` instead of a second copy of
    the answer (readers take the text from the HTML: core/html_text.py)."""
    from crystal_kernel.core.html_text import ANSWER_IN_HTML

    bundle = markdown_bundle(text)
    if len(text) > PREVIEW_CHARS + len(ANSWER_IN_HTML):
        bundle["text/plain"] = text[:PREVIEW_CHARS].rstrip() + " … " + ANSWER_IN_HTML
    return bundle
