"""Busy/idle for widget messages handled while a cell runs, so typing arrives whole.

The ipywidgets front end sends a widget's next state change only after the kernel
reports ``idle`` for the previous comm message. ipykernel >= 7.4 handles comm messages
concurrently while a cell holds the shell lock (that is what lets a form be answered at
all), but publishes no status for them: a person typing into a Text widget then
delivers only the first keystroke, and unchecking a box after checking it is lost
(DESIGN.md, "Typing into widgets while a cell runs"). :func:`announce_concurrent_comms`
wraps a kernel's ``dispatch_shell`` so that each such comm message gets a busy/idle
pair with the comm message as parent, followed by ``busy`` again with the running
cell's request as parent, so the front end still shows the kernel as busy.

Used by the Crystal kernel and, for the ``%%crystal`` magics, on the IPython kernel
the extension is loaded into.
"""

from __future__ import annotations

import functools
from typing import Any

_MARK = "_crystal_comm_status"


def _peek_header(kernel: Any, msg: Any) -> dict[str, Any] | None:
    """The header of a raw shell message, read without consuming its signature (a
    content-less deserialize is a peek: ipykernel's own shell_main does the same)."""
    try:
        _, frames = kernel.session.feed_identities(msg, copy=False)
        header: dict[str, Any] = kernel.session.deserialize(frames, content=False, copy=False)["header"]
        return header
    except Exception:
        return None


def announce_concurrent_comms(kernel: Any) -> bool:
    """Wrap ``kernel.dispatch_shell`` (once). False when the kernel has no such method
    (not an ipykernel kernel): nothing changes then."""
    original = getattr(kernel, "dispatch_shell", None)
    if original is None or getattr(original, _MARK, False):
        return original is not None

    @functools.wraps(original)
    async def dispatch_shell(msg: Any, /, subshell_id: str | None = None, *, concurrent: bool = False) -> Any:
        if not concurrent:
            return await original(msg, subshell_id=subshell_id)
        header = _peek_header(kernel, msg) if kernel.session else None
        # The request the running cell belongs to, to restore "busy" afterwards.
        cell_parent = kernel.get_parent("shell")
        if header is not None:
            kernel._publish_status("busy", "shell", parent={"header": header})
        try:
            return await original(msg, subshell_id=subshell_id, concurrent=True)
        finally:
            if header is not None:
                kernel._publish_status("idle", "shell", parent={"header": header})
                if (cell_parent or {}).get("header", {}).get("msg_type") == "execute_request":
                    kernel._publish_status("busy", "shell", parent=cell_parent)

    setattr(dispatch_shell, _MARK, True)
    kernel.dispatch_shell = dispatch_shell
    return True
