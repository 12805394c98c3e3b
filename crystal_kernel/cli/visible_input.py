"""The interactive prompt's line, shown with its invisible characters visible (TRUST-6).

What the person edits can hold text they did not type: a file name put there by Tab
completion (``@evil\\u202etxt.exe``), a job id, a line from the history. prompt_toolkit
already draws C0 and C1 controls as ``^[`` and ``<9b>``, but writes bidi overrides,
zero-width characters and lone surrogates to the terminal as they are. This input
processor shows every such character as ``terminal_safe`` (exact) writes it, styled as
a control character; the buffer, and so what is sent, keeps the real text.
"""

from __future__ import annotations

import bisect

from prompt_toolkit.formatted_text import OneStyleAndTextTuple, StyleAndTextTuples
from prompt_toolkit.layout.processors import Processor, Transformation, TransformationInput

from crystal_kernel.core.textsafe import invisible, terminal_safe

_MARKED = " class:control-character "


def _like(fragment: OneStyleAndTextTuple, style: str, text: str) -> OneStyleAndTextTuple:
    """``fragment`` with another style and text, keeping its mouse handler if it has one."""
    return (style, text) if len(fragment) == 2 else (style, text, fragment[2])


class VisibleControls(Processor):
    """Draw each invisible character of the line as its escape (``\\u202e``)."""

    def apply_transformation(self, transformation_input: TransformationInput) -> Transformation:
        fragments = transformation_input.fragments
        if not any(invisible(ch) for fragment in fragments for ch in fragment[1]):
            return Transformation(fragments)
        out: StyleAndTextTuples = []
        starts: list[int] = []  # the display position of each source character
        shown = 0
        for fragment in fragments:
            style, text = fragment[0], fragment[1]
            if "[ZeroWidthEscape]" in style:  # takes no place on the line
                out.append(fragment)
                continue
            plain: list[str] = []
            for ch in text:
                starts.append(shown)
                if invisible(ch):
                    if plain:
                        out.append(_like(fragment, style, "".join(plain)))
                        plain = []
                    piece = terminal_safe(ch, exact=True)
                    out.append(_like(fragment, style + _MARKED, piece))
                    shown += len(piece)
                else:
                    plain.append(ch)
                    shown += 1
            if plain:
                out.append(_like(fragment, style, "".join(plain)))
        end = len(starts)

        def to_display(position: int) -> int:
            return starts[position] if 0 <= position < end else shown + max(0, position - end)

        def to_source(position: int) -> int:
            if position >= shown:
                return end + (position - shown)
            return max(0, bisect.bisect_right(starts, position) - 1)

        return Transformation(out, source_to_display=to_display, display_to_source=to_source)
