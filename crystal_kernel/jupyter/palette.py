"""The colours of Crystal's outputs, as CSS values for inline styles.

Each is a CSS custom property that the lab extension defines for JupyterLab's light and
dark themes (``labextension/style/base.css``, from JupyterLab's theme variables where
those reach a WCAG contrast of 4.5:1, measured in the browser by
``tests/e2e/test_polish.py``), with the light value as the fallback a viewer without
the extension uses (a static HTML export, nbviewer, GitHub). A fallback is one plain
colour: the sanitizer cuts a nested ``var()`` (safe_html.py).

Text and backgrounds that JupyterLab's own variables already get right in both themes
(body text, borders, code backgrounds) use those directly.
"""

from __future__ import annotations

TEXT = "var(--jp-content-font-color1,#1f2328)"
MUTED = "var(--crystal-muted,#57606a)"
OK = "var(--crystal-ok,#1b5e20)"
WARN = "var(--crystal-warn,#7d4e00)"
ERROR = "var(--crystal-error,#b71c1c)"
ACCENT = "var(--crystal-accent,#0d47a1)"
BORDER = "var(--jp-border-color1,#d0d7de)"
#: Code blocks and result boxes: the background of JupyterLab's code cells.
CODE_BG = "var(--jp-cell-editor-background,#f6f8fa)"
#: Diff lines: text and its tinted background.
ADDED = "color:var(--crystal-diff-added,#1b5e20);background-color:var(--crystal-diff-added-bg,#c8e6c9)"
REMOVED = "color:var(--crystal-diff-removed,#b71c1c);background-color:var(--crystal-diff-removed-bg,#ffcdd2)"
#: A hidden character made visible in an approval (a tab, a trailing space).
MARKED = "color:var(--crystal-mark,#7d4e00);background-color:var(--crystal-mark-bg,#ffe0b2)"
#: The Thinking card: set apart from the answer by a border and a background.
THINKING_BOX = ("border:1px solid var(--jp-border-color2,#d0d7de);border-left:3px solid var(--jp-layout-color4,#8c959f);"
                "background-color:var(--jp-layout-color2,#f6f8fa);border-radius:4px;padding:2px 8px")
