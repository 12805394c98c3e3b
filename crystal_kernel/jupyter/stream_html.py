"""A streamed answer's live updates, for the lab extension's renderer (labextension/src/stream.ts).

While an answer streams, the kernel renders the Markdown so far with the same function
as the final answer (safe_html.markdown_html: markdown-it, raw HTML off, then the nh3
sanitizer, TRUST-1), and a live update carries only how that HTML changed since the
previous update: ``{"at": N, "html": TAIL, "size": S, "crc": C}`` means "keep the first
N characters of the HTML you have, append TAIL; the result is S characters long and its
UTF-8 bytes have CRC-32 C". Text that grows at the end of a paragraph or of a code
block changes only the end of the HTML, so an update is about as small as the text it
adds (the streaming byte budget, docs/benchmarks.md); a closed ``**`` or code span re-sends from there.

The extension rebuilds the whole HTML, checks size and CRC (a page that missed an
update, e.g. one that joined mid-stream, rebuilds nothing and waits for the next whole
text), then shows it as JupyterLab shows the final ``text/html``. So the page only ever
inserts HTML the kernel's sanitizer produced, the streamed answer looks like the final
one (same headings, code blocks and tables while it streams), and the final update
changes nothing on screen but what is new. An unclosed code fence renders as a code
block that runs to the end of the text so far, as CommonMark says.

Offsets and sizes count UTF-16 code units, as JavaScript strings do.
"""

from __future__ import annotations

import zlib
from typing import Any

#: The mime type of a streamed answer's live updates (the lab extension renders it).
STREAM_MIME = "application/vnd.crystal.stream+json"
#: What a front without the extension shows while the answer streams.
STREAMING_PLAIN = "Answering…"


def utf16_len(text: str) -> int:
    """``text``'s length as a JavaScript string (UTF-16 code units)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b``. A binary search over
    slice comparisons: each comparison runs in C, so a 100 KB answer costs ~17 of them
    instead of a Python loop over every character."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def html_update(shown: str, html: str) -> dict[str, Any]:
    """The live update that turns ``shown`` (the HTML the page has; ``""`` for none)
    into ``html`` (module docstring)."""
    at = common_prefix(shown, html)
    return {
        STREAM_MIME: {"at": utf16_len(html[:at]), "html": html[at:], "size": utf16_len(html),
                      "crc": zlib.crc32(html.encode("utf-8"))},
        "text/plain": STREAMING_PLAIN,
    }


def apply_update(shown: str, update: dict[str, Any]) -> str | None:
    """The HTML after ``update`` (a ``STREAM_MIME`` value) is applied to ``shown``, or
    None when it cannot be rebuilt from it (a missed update: the size or CRC differs).
    What the extension does (stream.ts ``applyUpdate``), for tests and readers."""
    at, tail, size, crc = update.get("at"), update.get("html"), update.get("size"), update.get("crc")
    if not (isinstance(at, int) and isinstance(tail, str) and isinstance(size, int) and isinstance(crc, int)):
        return None
    units = shown.encode("utf-16-le", "surrogatepass")
    if 2 * at > len(units):
        return None
    html = units[:2 * at].decode("utf-16-le", "surrogatepass") + tail
    if utf16_len(html) != size or zlib.crc32(html.encode("utf-8", "surrogatepass")) != crc:
        return None
    return html
