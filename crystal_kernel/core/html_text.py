"""Readable text from the HTML of a rendered answer, for readers that want text.

A Crystal answer shown in JupyterLab keeps the answer once, as its sanitized
``text/html``; its ``text/plain`` is then a short preview ending with
:data:`ANSWER_IN_HTML` (render.py: a second full copy would double what the notebook
stores and sends). Readers that want the answer's text (the notebook tools reading a
saved notebook, test drivers) take it from the HTML with :func:`html_text`: paragraphs,
headings, list items, table rows and code blocks become lines, with Markdown marks for
headings, list items and code fences. Standard library only (no Jupyter import).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: The end of a shortened ``text/plain`` of an answer whose whole text is its HTML.
ANSWER_IN_HTML = "[the whole answer is this output's text/html]"

_BLOCKS = frozenset({"p", "div", "ul", "ol", "table", "thead", "tbody", "tfoot", "tr", "blockquote",
                     "details", "summary", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "hr"})


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.pre = 0
        self.lists: list[list[int]] = []  # per open list: [next number] (ol) or [] (ul)

    def _drop_space(self) -> None:
        if self.out and self.out[-1] == " ":
            self.out.pop()

    def _newline(self) -> None:
        if self.out and not self.out[-1].endswith("\n"):
            self.out.append("\n")

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self.out.append("\n")
        elif tag == "pre":
            self._newline()
            lang = dict(attrs).get("data-lang") or ""
            self.out.append(f"```{lang}\n")
            self.pre += 1
        elif tag in ("ul", "ol"):
            self._newline()
            start = dict(attrs).get("start") or "1"
            self.lists.append([int(start) if start.isdigit() else 1] if tag == "ol" else [])
        elif tag == "li":
            self._newline()
            depth = "  " * max(0, len(self.lists) - 1)
            numbers = self.lists[-1] if self.lists else []
            if numbers:
                self.out.append(f"{depth}{numbers[0]}. ")
                numbers[0] += 1
            else:
                self.out.append(f"{depth}- ")
        elif tag in ("td", "th"):
            self._drop_space()
            self.out.append("| " if not self.out or self.out[-1].endswith("\n") else " | ")
        elif tag in _BLOCKS:
            self._newline()
            if tag[0] == "h" and tag[1:].isdigit():
                self.out.append("#" * int(tag[1:]) + " ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
            self._newline()
            self.out.append("```\n\n")
        elif tag in ("ul", "ol"):
            if self.lists:
                self.lists.pop()
            self._newline()
            if not self.lists:
                self.out.append("\n")
        elif tag == "tr":
            self._drop_space()
            self.out.append(" |\n")
        elif tag in ("p", "blockquote", "table", "h1", "h2", "h3", "h4", "h5", "h6"):
            self._newline()
            self.out.append("\n")
        elif tag in _BLOCKS or tag == "li":
            self._newline()

    def handle_data(self, data: str) -> None:
        if not self.pre and not data.strip() and "\n" in data:
            # The line breaks between block tags: a space between inline ones.
            if self.out and not self.out[-1].endswith(("\n", " ")):
                self.out.append(" ")
            return
        self.out.append(data)


def html_text(html: str) -> str:
    """The text of an HTML fragment, one line per block (module docstring)."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


def answer_text(data: dict[str, object]) -> str | None:
    """The text of an output bundle for a reader: ``text/plain``, or the text of its
    ``text/html`` when ``text/plain`` is an answer's short preview; None without either."""
    plain = data.get("text/plain")
    html = data.get("text/html")
    plain_s = "".join(plain) if isinstance(plain, list) else plain
    if isinstance(plain_s, str) and plain_s.rstrip().endswith(ANSWER_IN_HTML) and html:
        return html_text("".join(html) if isinstance(html, list) else str(html))
    return plain_s if isinstance(plain_s, str) else None
