"""Is a front end there that can show a form? Headless runs end their waits quickly.

A form waits for a person (widgets.py). Under ``jupyter nbconvert --execute``,
papermill or ``jupyter execute`` (all nbclient) nobody can ever answer it, and without
``--unattended`` the cell would wait ``personTimeoutSeconds`` (an hour) in silence.

What tells the two apart, measured on this machine (2026-12-01; JupyterLab 4.6 with
jupyterlab_widgets 3, ipywidgets 8, nbclient 0.11):

- On connecting to a kernel, JupyterLab's widget manager opens a
  ``jupyter.widget.control`` comm, sends ``request_states`` on it and a
  ``comm_info_request`` for ``jupyter.widget``; Crystal's lab extension opens
  ``crystal.live``. A person's clicks and typing are ``comm_msg`` messages.
- nbclient sends no comm message at all: it keeps widget models to itself.
- A kernel-opened comm to a target the page does not know is closed by JupyterLab at
  once (``@jupyterlab/services`` answers it with ``comm_close``); nbclient ignores it.

So :func:`watch` notes every comm message a front end sends this kernel. The Crystal
kernel watches from its start, so JupyterLab's connection messages are seen. The
``%crystal`` magics are loaded later, after those messages went by: there, the request
that loads them says who sent it. JupyterLab, Notebook 7 and VS Code put the cell's id in
an ``execute_request``'s metadata (``cellId``); nbclient, papermill, ``jupyter execute``
and ``jupyter console`` send none. A ``%load_ext crystal_kernel`` that came with a cell
id counts as a front end heard. (An earlier version opened a comm to a probe target,
which a page closes; nbclient logged "No handler found for comm target" for it in every
headless run.) A form that hears nothing within :data:`GRACE_SECONDS` ends as dismissed
or denied, and the kernel's log says why and how to run unattended.
"""

from __future__ import annotations

import asyncio
from typing import Any

from crystal_kernel.core.deadline import within

# Messages only a front end that speaks comms (and so can show widgets) sends.
COMM_MESSAGES = ("comm_open", "comm_msg", "comm_close", "comm_info_request")
# How long a form waits for a sign of a front end before it counts as headless. JupyterLab
# sends its connection messages before a person can run a cell. Generous, for a loaded
# machine.
GRACE_SECONDS = 10.0
_ATTR = "_crystal_front_ends"


class FrontEnds:
    """What one kernel has heard from front ends."""

    def __init__(self, kernel: Any = None) -> None:
        self.kernel = kernel
        self.heard = False
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    def hear(self) -> None:
        self.heard = True
        waiter = self._waiter
        if waiter is not None:
            loop, event = waiter
            try:  # comm handlers may run on another thread than the waiting form
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:
                pass  # that loop is closed: nobody waits any more

    async def someone_there(self, grace: float = GRACE_SECONDS) -> bool:
        """True once a front end was heard; False when ``grace`` seconds pass without one."""
        if self.heard:
            return True
        event = asyncio.Event()
        self._waiter = (asyncio.get_running_loop(), event)
        try:
            if not self.heard:
                await within(event.wait(), grace)
        except TimeoutError:
            pass
        finally:
            self._waiter = None
        return self.heard


def sent_from_a_cell(kernel: Any) -> bool:
    """Whether the request this kernel is executing carries a cell id (``cellId`` in its
    metadata), as JupyterLab, Notebook 7 and VS Code send and nbclient does not."""
    try:
        parent = kernel.get_parent("shell")
    except Exception:  # older ipykernel, or not a kernel at all
        parent = getattr(kernel, "_parent_header", None)
    metadata = parent.get("metadata") if isinstance(parent, dict) else None
    return isinstance(metadata, dict) and bool(metadata.get("cellId"))


def watch(kernel: Any, *, late: bool = False) -> FrontEnds | None:
    """Note every comm message that reaches ``kernel`` from a front end (once per
    kernel). None when the kernel has no shell handlers (not an ipykernel kernel).

    ``late``: watching starts after the front end connected (the magics); the request
    running now counts as a front end's when it came from a notebook cell."""
    known = getattr(kernel, _ATTR, None)
    fronts = known if isinstance(known, FrontEnds) else _install(kernel)
    if fronts is not None and late and sent_from_a_cell(kernel):
        fronts.hear()
    return fronts


def _install(kernel: Any) -> FrontEnds | None:
    handlers = getattr(kernel, "shell_handlers", None)
    if not isinstance(handlers, dict):
        return None
    fronts = FrontEnds(kernel)
    for name in COMM_MESSAGES:
        original = handlers.get(name)
        if original is None:
            continue

        def heard(stream: Any, idents: Any, msg: Any, _original: Any = original) -> Any:
            fronts.hear()
            return _original(stream, idents, msg)

        handlers[name] = heard
    setattr(kernel, _ATTR, fronts)
    return fronts


def of_running_kernel() -> FrontEnds | None:
    """The watcher of the kernel this code runs in, if one was installed."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except Exception:
        return None
    return getattr(getattr(shell, "kernel", None), _ATTR, None)


def headless_log_line(what: str, outcome: str) -> str:
    """The kernel log's line when a form ends because no front end can answer it."""
    return (f"Crystal: nobody can answer {what}: no front end that shows forms is connected to this kernel "
            f"(a headless run: jupyter nbconvert --execute, papermill, jupyter execute). {outcome}. "
            "To run such a notebook unattended, start the kernel with --unattended "
            "(for example CRYSTAL_ARGS=--unattended) or set personTimeoutSeconds to 0.")
