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
``%crystal`` magics are loaded later, after those messages went by: there, the first
form that finds nothing heard sends a probe (a comm to :data:`PROBE_TARGET`), which a
JupyterLab page closes. A form that hears nothing within :data:`GRACE_SECONDS` ends
as dismissed or denied, and the kernel's log says why and how to run unattended.
"""

from __future__ import annotations

import asyncio
from typing import Any

# Messages only a front end that speaks comms (and so can show widgets) sends.
COMM_MESSAGES = ("comm_open", "comm_msg", "comm_close", "comm_info_request")
PROBE_TARGET = "crystal.front-end-probe"
# How long a form waits for a sign of a front end before it counts as headless. JupyterLab
# sends its connection messages before a person can run a cell; its reply to the probe
# takes milliseconds. Generous, for a loaded machine.
GRACE_SECONDS = 10.0
_ATTR = "_crystal_front_ends"


class FrontEnds:
    """What one kernel has heard from front ends."""

    def __init__(self, kernel: Any = None, *, probe: bool = False):
        self.kernel = kernel
        self.probe = probe  # watching began late (the magics): ask before giving up
        self.heard = False
        self._probed = False
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

    def _send_probe(self) -> None:
        if self._probed or not self.probe:
            return
        self._probed = True
        try:
            from comm import create_comm

            # A page closes a comm to a target it does not know; nbclient never answers.
            comm = create_comm(target_name=PROBE_TARGET, data={})
            comm.on_close(lambda _msg: self.hear())
        except Exception:
            pass  # no comm machinery: nothing can answer a widget either

    async def someone_there(self, grace: float = GRACE_SECONDS) -> bool:
        """True once a front end was heard; False when ``grace`` seconds pass without one."""
        if self.heard:
            return True
        event = asyncio.Event()
        self._waiter = (asyncio.get_running_loop(), event)
        try:
            self._send_probe()
            if not self.heard:
                await asyncio.wait_for(event.wait(), grace)
        except asyncio.TimeoutError:
            pass
        finally:
            self._waiter = None
        return self.heard


def watch(kernel: Any, *, probe: bool = False) -> FrontEnds | None:
    """Note every comm message that reaches ``kernel`` from a front end (once per
    kernel). None when the kernel has no shell handlers (not an ipykernel kernel)."""
    known = getattr(kernel, _ATTR, None)
    if isinstance(known, FrontEnds):
        return known
    handlers = getattr(kernel, "shell_handlers", None)
    if not isinstance(handlers, dict):
        return None
    fronts = FrontEnds(kernel, probe=probe)
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
