"""``/jobs`` as a table with Stop buttons and ``/logs JOB --follow`` as a live view.

Both use the session's JobManager (crystal_kernel/jobs/manager.py) directly. The job
table is an ipywidgets grid whose bundle also carries an HTML table and a text table, so
a saved notebook (or a front without widgets) still shows the jobs. The log view is a
``display_id`` output that a background task keeps updating after the cell has
finished, until the job ends; it holds the last ``LOG_LINES`` lines only.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from crystal_kernel.core.errors import ToolError, UserError
from crystal_kernel.jupyter import palette
from crystal_kernel.jupyter.cards import Bundle, esc, table_bundle
from crystal_kernel.jupyter.safe_html import NO_MATH, html_bundle

LOG_LINES = 200
LOG_LINE_CHARS = 2000
LOG_UPDATES_PER_SECOND = 4.0
REFRESH_SECONDS = 1.0
COLUMNS = ["id", "state", "exit", "runtime", "command"]


def _row(info: Any) -> list[str]:
    exit_text = "" if info.exit_code is None else str(info.exit_code)
    if info.signal:
        exit_text = (exit_text + " " if exit_text else "") + str(info.signal)
    command = info.command if len(info.command) <= 80 else info.command[:79] + "…"
    return [info.id, info.state, exit_text, f"{info.runtime_seconds:.1f}s", command]


def jobs_table(infos: list[Any]) -> Bundle:
    if not infos:
        return html_bundle("No background jobs in this session.", "<i>No background jobs in this session.</i>")
    return table_bundle(COLUMNS, [_row(i) for i in infos], title="Background jobs")


def stale_table(infos: list[Any]) -> Bundle:
    """What a saved /jobs table says once its kernel is gone (live_outputs.py): jobs do
    not outlive their kernel (BG-2), so no listed job still runs."""
    when = time.strftime("%H:%M:%S")
    note = (f"Jobs stop with their kernel (BG-2); the kernel that ran them has stopped. "
            f"States as of {when}.")
    running = [i for i in infos if i.active]
    rows = [[*_row(i)[:1], "stopped with the kernel" if i.active else i.state, *_row(i)[2:]] for i in infos]
    table = table_bundle(COLUMNS, rows, title="Background jobs") if running else jobs_table(infos)
    return html_bundle(table["text/plain"] + "\n" + note,
                       table["text/html"] + f"<div><i>{esc(note)}</i></div>")


STOP_ROW_STALE = html_bundle("Stop buttons of a kernel that has stopped: its jobs stopped with it (BG-2).",
                             "<i>Stop buttons of a kernel that has stopped: its jobs stopped with it (BG-2).</i>")


class JobsTable:
    """The /jobs view: a static table (HTML with a text fallback, updated in place as
    states change, so a saved notebook shows it anywhere) and, under it, a row of Stop
    buttons for the jobs that run. When no listed job runs any more, the buttons are
    replaced by a line saying so."""

    def __init__(self, manager: Any, output: Any):
        import ipywidgets as w

        self.manager = manager
        self.infos = manager.status()
        running = any(i.active for i in self.infos)
        self.table = output.show(jobs_table(self.infos), stale=stale_table(self.infos) if running else None)
        self.buttons: dict[str, Any] = {}
        for info in self.infos:
            if info.active:
                button = w.Button(description=f"Stop {info.id}", button_style="danger",
                                  tooltip=f"Stop job {info.id} ({info.command[:60]}) and its processes",
                                  layout=w.Layout(width="auto"))
                button.on_click(lambda _b, job_id=info.id: self._stop(job_id))
                self.buttons[info.id] = button
        self.row = w.HBox(list(self.buttons.values()))
        self.row.add_class("crystal-widget")  # the lab extension's button colours (contrast)
        self.row_handle = output.show(self.row._repr_mimebundle_(), stale=STOP_ROW_STALE) if self.buttons else None
        self.stopping: set[asyncio.Task[None]] = set()
        self.done = not self.buttons

    def _stop(self, job_id: str) -> None:
        button = self.buttons[job_id]
        button.disabled = True
        button.description = f"Stopping {job_id}…"
        task = asyncio.ensure_future(self._astop(job_id))
        self.stopping.add(task)
        task.add_done_callback(self.stopping.discard)

    async def _astop(self, job_id: str) -> None:
        try:
            await self.manager.astop(job_id)
        finally:
            self.buttons[job_id].description = f"Stop {job_id}"
            self.refresh()

    def refresh(self) -> bool:
        """Update the table and the buttons; True while some listed job still runs."""
        if self.done:
            return False
        infos = []
        for info in self.infos:
            try:
                infos.append(self.manager.status(info.id))
            except ToolError:
                infos.append(info)
        live = any(i.active for i in infos)
        if [_row(i) for i in infos] != [_row(i) for i in self.infos] or not live:
            self.infos = infos
            self.table.update(jobs_table(infos), stale=stale_table(infos) if live else None)
        running = False
        for info in infos:
            if info.id in self.buttons:
                self.buttons[info.id].disabled = not info.active
            running = running or info.active
        if not running:
            self.done = True
            if self.row_handle is not None:
                self.row_handle.update(html_bundle("Every listed job has ended.", "<i>Every listed job has ended.</i>"))
            for button in self.buttons.values():
                button.close()
            self.row.close()
        return running

    async def keep_fresh(self, limit_seconds: float = 3600.0) -> None:
        """Refresh every second while a job runs (bounded in time)."""
        deadline = time.monotonic() + limit_seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(REFRESH_SECONDS)
            if not self.refresh():
                return


class LogView:
    """The last LOG_LINES lines of a job's output, updated in place while it runs."""

    def __init__(self, manager: Any, job_id: str, output: Any):
        self.manager = manager
        self.job_id = job_id
        self.output = output
        self.lines: collections.deque[str] = collections.deque(maxlen=LOG_LINES)
        self.partial = ""
        self.dropped = 0
        try:
            self.info = manager.status(job_id)
        except ToolError as exc:
            raise UserError(str(exc)) from None
        chunk = manager.logs(job_id)
        self.offset = chunk.next_offset
        self.dropped = chunk.start
        self._add(chunk.text)
        self.handle = output.show(self.bundle())
        self.updates = 0

    def _add(self, text: str) -> None:
        pieces = (self.partial + text).split("\n")
        self.partial = pieces.pop()
        for line in pieces:
            if len(self.lines) == self.lines.maxlen:
                self.dropped += 1
            self.lines.append(line if len(line) <= LOG_LINE_CHARS else line[:LOG_LINE_CHARS] + "…")
        if len(self.partial) > LOG_LINE_CHARS:
            self.partial = self.partial[-LOG_LINE_CHARS:]

    def text(self) -> str:
        body = list(self.lines) + ([self.partial] if self.partial else [])
        return "\n".join(body)

    def header(self) -> str:
        info = self.info
        state = info.state + ("" if info.exit_code is None else f" (exit {info.exit_code})")
        return f"{info.id} · {state} · {info.command}"

    def bundle(self) -> Bundle:
        header = self.header()
        note = f"[showing the last {LOG_LINES} lines]\n" if self.dropped else ""
        body = note + self.text()
        colour = palette.WARN if self.info.active else palette.MUTED
        html = (f'<div class="{NO_MATH}" data-job="{esc(self.job_id)}" data-state="{esc(self.info.state)}">'
                f'<div style="color:{colour};font-size:85%"><code>{esc(header)}</code></div>'
                f'<pre style="margin:2px 0;padding:4px 6px;background-color:#1f2328;color:#e6edf3;max-height:30em;font-family:monospace;font-size:85%;'
                f'overflow:auto;white-space:pre-wrap">{esc(body)}</pre></div>')
        return html_bundle(header + "\n" + body, html)

    async def follow(self) -> None:
        """Keep the view current until the job ends (updates throttled)."""
        interval = 1.0 / LOG_UPDATES_PER_SECOND
        while True:
            await self.manager.wait_output(self.job_id, self.offset, timeout=5.0)
            chunk = self.manager.logs(self.job_id, self.offset)
            self.offset = chunk.next_offset
            self._add(chunk.text)
            self.info = self.manager.status(self.job_id)
            self.handle.update(self.bundle())
            self.updates += 1
            if not self.info.active and chunk.remaining <= 0:
                return
            await asyncio.sleep(interval)
