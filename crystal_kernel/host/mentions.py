"""``@path`` in a cell attaches that file's content to the turn.

A mention starts a word: ``@src/app.py``, ``@"name with spaces.txt"``. Trailing
punctuation that is not part of an existing file name is dropped (``see @a.py.``).
Paths go through the session's access rules, like a ``read`` call. A mention that names
no file is left as plain text (``@decorator`` or an e-mail address are not errors);
anything refused or unreadable is reported in a note and not attached. Bounded: at most
``MAX_FILES`` files of ``MAX_FILE_CHARS`` characters each; images are attached as images
when the model accepts them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.messages import ImagePart, Part, TextPart

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session

MAX_FILES = 10
MAX_FILE_CHARS = 100_000
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MENTION = re.compile(r'(?:(?<=\s)|^)@(?:"([^"\n]+)"|([^\s"\'`]+))')
_TRAILING = ".,;:!?)]}'"


def find_mentions(text: str) -> list[str]:
    """The raw paths mentioned, in order, without duplicates."""
    out: list[str] = []
    for m in MENTION.finditer(text):
        path = m.group(1) or m.group(2)
        if path and path not in out:
            out.append(path)
    return out


def _existing(session: Session, raw: str) -> str | None:
    """The mention as an existing path, trimming trailing punctuation if needed."""
    candidate = raw
    while candidate:
        if session.access.absolute(candidate).exists():
            return candidate
        if candidate[-1] in _TRAILING:
            candidate = candidate[:-1]
        else:
            return None
    return None


def attach_mentions(session: Session, text: str) -> tuple[str | list[Part], list[str]]:
    """The turn prompt for a cell (plain text, or parts with the attached files) and the
    notes to show the person."""
    notes: list[str] = []
    parts: list[Part] = []
    attached = 0
    for raw in find_mentions(text):
        path = _existing(session, raw)
        if path is None:
            continue
        if attached >= MAX_FILES:
            notes.append(f"Only the first {MAX_FILES} mentioned files were attached; @{path} was not.")
            continue
        try:
            resolved = session.access.resolve(path)
        except ToolError as exc:
            notes.append(f"@{path} was not attached: {exc}")
            continue
        if not resolved.is_file():
            notes.append(f"@{path} is not a regular file, so it was not attached.")
            continue
        got, note = _read(session, path, resolved)
        if note:
            notes.append(note)
        if got:
            parts.extend(got)
            attached += 1
    if not parts:
        return text, notes
    return [TextPart(text=text), *parts], notes


def _read(session: Session, shown: str, resolved: Any) -> tuple[list[Part], str | None]:
    from crystal_kernel.tools.images import sniff_image_type

    try:
        size = resolved.stat().st_size
        with open(resolved, "rb") as handle:
            head = handle.read(MAX_IMAGE_BYTES + 1 if size <= MAX_IMAGE_BYTES else MAX_FILE_CHARS * 4)
    except OSError as exc:
        return [], f"@{shown} could not be read: {exc.strerror or exc}."
    mime = sniff_image_type(head[:64])
    if mime is not None:
        if not session.capabilities.images:
            return [], f"@{shown} is an image and this model cannot take images; it was not attached."
        if size > MAX_IMAGE_BYTES:
            return [], f"@{shown} is larger than 20 MiB; it was not attached."
        return [TextPart(text=f'<file path="{shown}">(the image follows)</file>'),
                ImagePart.from_bytes(mime, head)], f"Attached image @{shown}."
    if b"\x00" in head[:8192]:
        return [], f"@{shown} is not a text file; it was not attached."
    text = head.decode("utf-8", errors="replace")
    note = f"Attached @{shown} ({size:,} bytes)."
    if len(text) > MAX_FILE_CHARS or size > len(head):
        text = text[:MAX_FILE_CHARS]
        note = f"Attached the first {MAX_FILE_CHARS:,} characters of @{shown} ({size:,} bytes)."
    return [TextPart(text=f'<file path="{shown}">\n{text}\n</file>')], note
