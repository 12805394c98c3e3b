"""Turn a finished exec tool's output into a tool result (EX-10 … EX-16)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crystal_kernel.core.errors import ToolError
from crystal_kernel.tools.base import ToolResult, truncate_output
from crystal_kernel.tools.images import NO_IMAGES_TEXT, load_images, parse_image_refs

if TYPE_CHECKING:
    from crystal_kernel.tools.child_process import ProcessOutcome

PREVIEW_CHARS = 500


def _exit_text(name: str, returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"{name} was killed by signal {-returncode}."
    return f"{name} exited with code {returncode}."


def _decode(data: bytes, total: int, stream: str) -> str:
    text = data.decode("utf-8", errors="replace")
    if total > len(data):
        text += f"\n[... {stream} cut: the tool wrote {total} bytes ...]"
    return text


def _join(text: str, stderr: str) -> str:
    if not stderr:
        return text
    if not text:
        return stderr
    return text + ("" if text.endswith("\n") else "\n") + stderr


def text_result(name: str, outcome: ProcessOutcome, limit: int) -> ToolResult:
    """EX-16: stdout then stderr, truncated; a non-zero exit fails the call."""
    out = _join(_decode(outcome.stdout, outcome.stdout_total, "stdout"),
                _decode(outcome.stderr, outcome.stderr_total, "stderr"))
    if outcome.returncode != 0:
        return ToolResult.fail(truncate_output(_join(_exit_text(name, outcome.returncode), out), limit))
    return ToolResult(ok=True, text=truncate_output(out, limit))


def _stdout_for_parsing(outcome: ProcessOutcome, limit: int) -> tuple[str, bool]:
    """EX-14: stdout cut to the tool output limit before parsing. Returns (text, cut)."""
    raw = outcome.stdout
    cut = outcome.stdout_total > len(raw)
    text = raw.decode("utf-8", errors="replace")
    if len(text) > limit:
        text, cut = text[:limit], True
    return text.removeprefix("\ufeff"), cut


async def content_result(name: str, outcome: ProcessOutcome, limit: int, workspace: Path, *,
                         images_ok: bool) -> ToolResult:
    """EX-10 … EX-13: one JSON object with optional text and images; stderr appended."""
    stderr = _decode(outcome.stderr, outcome.stderr_total, "stderr")
    stdout, cut = _stdout_for_parsing(outcome, limit)
    error: json.JSONDecodeError | None = None
    try:
        data: Any = json.loads(stdout)
    except json.JSONDecodeError as exc:
        data, error = None, exc

    if outcome.returncode != 0:
        # EX-11: failed, no images; keep the tool's own words when it gave any.
        body: str = data["text"] if isinstance(data, dict) and isinstance(data.get("text"), str) else stdout
        return ToolResult.fail(truncate_output(_join(_join(_exit_text(name, outcome.returncode), body), stderr), limit))

    if error is not None or not isinstance(data, dict):
        why = f"not valid JSON ({error.msg} at line {error.lineno} column {error.colno})" if error else \
            f"JSON but not an object (it is {type(data).__name__})"
        if cut:
            why += (f"; stdout was {outcome.stdout_total} bytes and was cut to the tool output limit "
                    f"of {limit} characters before parsing (large images should use \"path\")")
        preview = stdout[:PREVIEW_CHARS] + ("…" if len(stdout) > PREVIEW_CHARS else "")
        text = f"{name} printed output that is {why}. Stdout preview:\n{preview}"
        return ToolResult.fail(truncate_output(_join(text, stderr), limit))

    text = data.get("text", "")
    if text is None:
        text = ""
    if not isinstance(text, str):
        return ToolResult.fail(_join(f"{name} returned a 'text' that is not a string.", stderr))
    if data.get("images") and not images_ok:
        return ToolResult.fail(NO_IMAGES_TEXT)  # EX-12: exactly this text, nothing opened
    try:
        refs = parse_image_refs(data.get("images"))
        images = await load_images(refs, workspace, images_ok=images_ok)
    except ToolError as exc:
        if str(exc) == NO_IMAGES_TEXT:
            return ToolResult.fail(NO_IMAGES_TEXT)
        return ToolResult.fail(truncate_output(_join(f"{name} returned an image the host refused: {exc}", stderr),
                                               limit))
    return ToolResult(ok=True, text=truncate_output(_join(text, stderr), limit), images=images)
