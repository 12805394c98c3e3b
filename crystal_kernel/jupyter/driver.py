"""Play a notebook frontend against a real kernel, for tests and benchmarks.

:class:`KernelDriver` wraps a jupyter_client ``BlockingKernelClient``: it executes a
cell, collects the cell's outputs (``display_data`` updated in place by
``update_display_data``, streams, errors), keeps the state of every ipywidgets model the
kernel opens, and answers widgets the way a browser does — a Button click is a
``comm_msg`` with ``{"method": "custom", "content": {"event": "click"}}``, a value is
``{"method": "update", "state": {...}}`` (DESIGN.md). Actions wait until their widget
exists, so a test can script a whole form: ``[click("Next"), click("Submit")]``.
"""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crystal_kernel.core.html_text import answer_text

WIDGET_TARGET = "jupyter.widget"
ACTION_PAUSE = 0.2


@dataclass
class Action:
    """One frontend action on the first open widget that matches."""

    kind: str  # "click" or "set"
    match: Callable[[dict[str, Any]], bool]
    state: dict[str, Any] = field(default_factory=dict)
    label: str = ""
    # Which of several matching widgets (in the order the kernel opened them).
    nth: int = 0


def click(description: str, tooltip: str | None = None) -> Action:
    """Click the Button whose description is ``description`` (and whose tooltip
    contains ``tooltip``, when given)."""
    return Action("click", lambda s: s.get("_model_name") == "ButtonModel" and s.get("description") == description
                  and not s.get("disabled") and (tooltip is None or tooltip in (s.get("tooltip") or "")),
                  label=f"click {description!r}")


def check(description: str, value: bool = True) -> Action:
    """Set the Checkbox whose description is ``description``."""
    return Action("set", lambda s: s.get("_model_name") == "CheckboxModel" and s.get("description") == description,
                  {"value": value}, label=f"check {description!r}")


def type_text(placeholder_part: str, value: str, nth: int = 0) -> Action:
    """Type into the (``nth``) Text field whose placeholder contains ``placeholder_part``."""
    return Action("set", lambda s: s.get("_model_name") == "TextModel"
                  and placeholder_part in (s.get("placeholder") or ""), {"value": value},
                  label=f"type {value!r}", nth=nth)


class KeyByKey:
    """Type ``text`` into a Text widget the way the ipywidgets front end does: one
    ``update`` per keystroke, the next only after the kernel reported ``idle`` for the
    previous one (DESIGN.md). Then click ``then`` buttons in order. Use as a cell's
    ``on_message``; ``statuses`` records the status each keystroke got, and
    ``done`` tells when everything was sent. A kernel that publishes no status for comm
    messages during a cell stalls after the first key (the cell then times out)."""

    def __init__(self, placeholder_part: str, text: str, then: tuple[str, ...] = ()):
        self.placeholder_part = placeholder_part
        self.text = text
        self.then = list(then)
        self.typed = 0
        self.waiting: str | None = None  # msg_id of the keystroke awaiting its idle
        self.statuses: list[str] = []
        self.ready_at = 0.0

    @property
    def done(self) -> bool:
        return self.typed == len(self.text) and self.waiting is None and not self.then

    def __call__(self, msg: dict[str, Any] | None, driver: KernelDriver) -> None:
        if msg is not None and msg["msg_type"] == "status" and self.waiting \
                and msg["parent_header"].get("msg_id") == self.waiting:
            self.statuses.append(msg["content"]["execution_state"])
            if msg["content"]["execution_state"] == "idle":
                self.waiting = None
        if self.waiting is not None:
            return
        if self.typed < len(self.text):
            field = [k for k, s in driver.open_widgets().items() if s.get("_model_name") == "TextModel"
                     and self.placeholder_part in (s.get("placeholder") or "")]
            if field:
                self.typed += 1
                state = {"value": self.text[:self.typed]}
                driver.widgets[field[0]].update(state)
                self.waiting = driver.send_comm(field[0], {"method": "update", "state": state, "buffer_paths": []})
            return
        if self.then and time.monotonic() >= self.ready_at and driver._try(click(self.then[0])):
            self.then.pop(0)
            self.ready_at = time.monotonic() + ACTION_PAUSE


@dataclass
class CellRun:
    reply: dict[str, Any]
    messages: list[dict[str, Any]]
    # display_id (or a running index for outputs without one) -> latest data bundle
    displays: dict[str, dict[str, Any]]
    order: list[str]
    updates: dict[str, int]
    streams: str
    seconds: float

    @property
    def status(self) -> str:
        status: str = self.reply["content"]["status"]
        return status

    def outputs(self) -> list[dict[str, Any]]:
        """The latest bundle of each output, in order; an output emptied by an update (a
        streamed answer replaced by its whole text, live_outputs.LiveDisplay) shows
        nothing in a notebook and is left out."""
        return [self.displays[k] for k in self.order if self.displays[k]]

    def texts(self) -> list[str]:
        """Each output's text: its ``text/plain``, or an answer's text from its HTML."""
        return [answer_text(d) or "" for d in self.outputs()]

    def find(self, needle: str, mime: str = "text/plain") -> dict[str, Any]:
        for d in self.outputs():
            if needle in str(d.get(mime, "")):
                return d
        raise AssertionError(f"No output with {needle!r} in {mime}; outputs: {self.texts()}")


class KernelDriver:
    """A front end that shows widgets. Like JupyterLab's widget manager on connecting
    (measured, front_ends.py), it asks the kernel for its ``jupyter.widget`` comms; and
    like ``@jupyterlab/services`` it closes a comm the kernel opens to a target it does
    not know. ``widgets=False`` plays a front end that sends no comm message at all
    (nbclient)."""

    def __init__(self, client: Any, *, widgets: bool = True):
        self.kc = client
        self.shows_widgets = widgets
        self.widgets: dict[str, dict[str, Any]] = {}
        self.closed: set[str] = set()
        # update_display_data seen outside a cell run (e.g. a live log view).
        self.late_updates: dict[str, dict[str, Any]] = {}
        if widgets:
            self.kc.shell_channel.send(self.kc.session.msg("comm_info_request", {"target_name": WIDGET_TARGET}))

    # ----- comms -----------------------------------------------------------------------------
    def _comm(self, msg: dict[str, Any]) -> None:
        kind = msg["msg_type"]
        content = msg["content"]
        comm_id = content.get("comm_id")
        if kind == "comm_open" and content.get("target_name") == WIDGET_TARGET:
            self.widgets[comm_id] = dict(content.get("data", {}).get("state", {}))
        elif kind == "comm_open" and self.shows_widgets:  # a target this front end does not know
            self.kc.shell_channel.send(self.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}}))
        elif kind == "comm_msg" and comm_id in self.widgets:
            data = content.get("data", {})
            if data.get("method") in ("update", "echo_update"):
                self.widgets[comm_id].update(data.get("state", {}))
        elif kind == "comm_close":
            self.closed.add(comm_id)

    def open_widgets(self) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.widgets.items() if k not in self.closed}

    def open_comm(self, target: str, data: dict[str, Any]) -> str:
        """Open a comm to ``target`` in the kernel, as a front end does; returns its id.
        (``open_comm("crystal.live", {"streamDeltas": True})`` is what the lab extension
        sends on connecting: answers then stream as appended text, render.py.)"""
        comm_id = uuid.uuid4().hex
        self.kc.shell_channel.send(self.kc.session.msg(
            "comm_open", {"comm_id": comm_id, "target_name": target, "data": data}))
        return comm_id

    def send_comm(self, comm_id: str, data: dict[str, Any]) -> str:
        """Send a comm message to the kernel; returns its msg_id."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        self.kc.shell_channel.send(msg)
        msg_id: str = msg["header"]["msg_id"]
        return msg_id

    def _try(self, action: Action) -> bool:
        matches = [(k, s) for k, s in self.open_widgets().items() if action.match(s)]
        for comm_id, state in matches[action.nth:action.nth + 1]:
            if action.kind == "click":
                self.send_comm(comm_id, {"method": "custom", "content": {"event": "click"}})
            else:
                state.update(action.state)
                self.send_comm(comm_id, {"method": "update", "state": action.state, "buffer_paths": []})
            return True
        return False

    # ----- running cells ----------------------------------------------------------------------
    def execute(self, code: str, *, actions: list[Action] | None = None, timeout: float = 60.0,
                on_message: Callable[[dict[str, Any] | None, KernelDriver], None] | None = None,
                cell_id: str | None = None) -> CellRun:
        """Run one cell; perform ``actions`` in order as their widgets appear. ``cell_id``:
        sent as JupyterLab does, in the request's metadata (``cellId``)."""
        pending = list(actions or [])
        started = time.monotonic()
        if cell_id is None and self.shows_widgets:
            cell_id = uuid.uuid4().hex  # a notebook front names the cell it runs (front_ends.py)
        if cell_id is None:
            msg_id = self.kc.execute(code)
        else:
            content = {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                       "allow_stdin": False, "stop_on_error": True}
            request = self.kc.session.msg("execute_request", content, metadata={"cellId": cell_id})
            self.kc.shell_channel.send(request)
            msg_id = request["header"]["msg_id"]
        messages: list[dict[str, Any]] = []
        displays: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        updates: dict[str, int] = {}
        streams: list[str] = []
        deadline = started + timeout
        ready_at = 0.0
        idle = False
        while not idle:
            if time.monotonic() > deadline:
                raise TimeoutError(f"cell did not finish in {timeout}s; pending actions: "
                                   f"{[a.label for a in pending]}; outputs so far: {order}")
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                msg = None
            if msg is not None:
                kind = msg["msg_type"]
                if kind.startswith("comm_"):
                    self._comm(msg)
                elif kind == "update_display_data":
                    did = msg["content"].get("transient", {}).get("display_id")
                    if did in displays:
                        displays[did] = msg["content"]["data"]
                        updates[did] = updates.get(did, 0) + 1
                    else:
                        self.late_updates[did] = msg["content"]["data"]
                if msg["parent_header"].get("msg_id") == msg_id:
                    messages.append(msg)
                    content = msg["content"]
                    if kind == "display_data":
                        did = content.get("transient", {}).get("display_id") or f"#{len(order)}"
                        displays[did] = content["data"]
                        order.append(did)
                        updates[did] = 0
                    elif kind == "stream":
                        streams.append(content["text"])
                    elif kind == "error":
                        key = f"#{len(order)}"
                        displays[key] = {"text/plain": f"{content['ename']}: {content['evalue']}"}
                        order.append(key)
                    elif kind == "status" and content["execution_state"] == "idle":
                        idle = True
            if on_message is not None:
                on_message(msg, self)  # msg is None on a quiet poll (every 50 ms)
            # One action at a time, with a pause for the kernel's answer to arrive (new or
            # closed widgets), as a person would.
            if pending and time.monotonic() >= ready_at and self._try(pending[0]):
                pending.pop(0)
                ready_at = time.monotonic() + ACTION_PAUSE
        reply = self._reply(msg_id, max(1.0, deadline - time.monotonic()))
        if pending:
            raise AssertionError(f"actions never found their widget: {[a.label for a in pending]}")
        return CellRun(reply, messages, displays, order, updates, "".join(streams), time.monotonic() - started)

    def _reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            msg: dict[str, Any] = self.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def drain(self, seconds: float, until: Callable[[KernelDriver], bool] | None = None) -> None:
        """Read iopub for up to ``seconds`` (after a cell ended), tracking late display
        updates and widget state, until ``until(self)`` is true."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if until is not None and until(self):
                return
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            kind = msg["msg_type"]
            if kind.startswith("comm_"):
                self._comm(msg)
            elif kind == "update_display_data":
                did = msg["content"].get("transient", {}).get("display_id")
                self.late_updates[did] = msg["content"]["data"]
