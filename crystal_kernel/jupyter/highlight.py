"""Syntax colours for the fenced code blocks of answers (TRUST-1 holds).

The code is split into tokens by Pygments' lexer for the fence's language (no guessing:
a fence without a known language stays plain) and each token is escaped and wrapped in a
``<span>`` whose only markup is an inline colour; the whole answer is cleaned by nh3
afterwards like every output (safe_html.py). The colours are JupyterLab's own code
colours (``--jp-mirror-editor-*``), so an answer's code looks like a code cell in Light
and Dark; the lab extension adjusts the few that read below 4.5:1 on a code background,
and the fallbacks are light colours that pass on the static export's background.
"""

from __future__ import annotations

from html import escape

from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import Comment, Keyword, Name, Number, Operator, String, _TokenType
from pygments.util import ClassNotFound

#: Longer code stays plain: one span per token would make a large output larger still.
HIGHLIGHT_LIMIT = 20_000

# Most specific first: Name.Builtin before Name, Operator.Word before Operator.
_COLOURS: list[tuple[_TokenType, str]] = [
    (Comment, "var(--jp-mirror-editor-comment-color,#3b6e6e)"),
    (Keyword, "var(--jp-mirror-editor-keyword-color,#007000)"),
    (Operator.Word, "var(--jp-mirror-editor-keyword-color,#007000)"),
    (Operator, "var(--jp-mirror-editor-operator-color,#7800c2)"),
    (String, "var(--jp-mirror-editor-string-color,#ba2121)"),
    (Number, "var(--jp-mirror-editor-number-color,#007000)"),
    (Name.Builtin, "var(--jp-mirror-editor-builtin-color,#007000)"),
    (Name.Function, "var(--jp-mirror-editor-def-color,#0000ff)"),
    (Name.Class, "var(--jp-mirror-editor-def-color,#0000ff)"),
    (Name.Decorator, "var(--jp-mirror-editor-meta-color,#8a18d6)"),
    (Name.Tag, "var(--jp-mirror-editor-tag-color,#117700)"),
    (Name.Attribute, "var(--jp-mirror-editor-attribute-color,#0000cc)"),
]


def _colour(kind: _TokenType) -> str | None:
    for family, colour in _COLOURS:
        if kind in family:
            return colour
    return None


def _lexer(language: str) -> Lexer | None:
    try:
        return get_lexer_by_name(language, stripnl=False, stripall=False, ensurenl=False)
    except (ClassNotFound, ValueError):
        return None


def highlighted_html(code: str, language: str) -> str:
    """``code`` as escaped HTML, coloured by ``language``'s lexer when there is one."""
    lexer = _lexer(language) if language and len(code) <= HIGHLIGHT_LIMIT else None
    if lexer is None:
        return escape(code)
    # Neighbouring tokens of one colour (a string's quotes and body) share one span.
    runs: list[tuple[str | None, str]] = []
    for kind, value in lexer.get_tokens(code):
        colour = _colour(kind) if value.strip() else None
        if runs and runs[-1][0] == colour:
            runs[-1] = (colour, runs[-1][1] + value)
        else:
            runs.append((colour, value))
    return "".join(escape(value) if colour is None else f'<span style="color:{colour}">{escape(value)}</span>'
                   for colour, value in runs)
