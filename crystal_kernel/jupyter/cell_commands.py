"""Slash-command cells in the Crystal kernel (and ``%crystal /command`` in the magics).

Each non-empty line of a command cell is one command (``/mode plan`` then ``/approval
edit`` in one cell works). Each line is parsed into an op (core/ops.py); most go to
the host's ``submit`` and show its answer's text; the kernel adds what only a notebook can do: ``/jobs`` as a table with
Stop buttons, ``/logs JOB --follow`` as a live view, ``/resume`` without an id
continuing this notebook's last session, and ``/fork`` switching the kernel to the fork.
Each runs against the front's :class:`~crystal_kernel.jupyter.notebook_front.NotebookFront`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from typing_extensions import assert_never

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.ops import Cd, Help, Jobs, Logs, Resume, Tools, Trust
from crystal_kernel.host import command_results as answers
from crystal_kernel.jupyter import parameters
from crystal_kernel.jupyter.notebook_session import resume_target, sessions_by_notebook
from crystal_kernel.jupyter.notebook_turn import KERNEL_HELP, CellOutcome

if TYPE_CHECKING:
    from crystal_kernel.host.session import Session
    from crystal_kernel.jupyter.notebook_front import NotebookFront


def _show_text(text: str) -> None:
    from crystal_kernel.jupyter.render import IPythonOutput

    IPythonOutput().show({"text/plain": text})


async def run_command_cell(front: NotebookFront, text: str, namespace: dict[str, Any]) -> CellOutcome:
    """Each line a command; ``/parameter`` lines set values in ``namespace`` (the
    kernel's Python namespace), which later cells use as ``{NAME}``."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if not line.startswith("/"):
            raise UserError(f"Each line of a command cell must start with '/': {line[:60]!r}. "
                            "Put the prompt in a cell of its own.")
    # Parameters first, all checked before any is set: a papermill cell with one bad
    # line changes nothing.
    settings = [parameters.parse_line(line) for line in lines if parameters.is_parameter_line(line)]
    for name, raw, value in settings:
        if raw is not None:
            assert name is not None  # parse_line gives a name with every value
            parameters.set_parameter(namespace, name, value)
    for line in lines:
        if parameters.is_parameter_line(line):
            name, raw, _ = parameters.parse_line(line)
            if raw is None:  # no value: show the parameters (or one)
                _show_text(parameters.describe(namespace, name))
            continue
        await run_line(front, line)
    return CellOutcome()


async def run_line(front: NotebookFront, line: str) -> None:
    """One command line: parsed into an op (core/ops.py), the notebook's own ways with
    /help, /jobs, /logs and a bare /resume, the rest submitted to the host."""
    from crystal_kernel.host.commands import HELP, parse_for, submit

    op = parse_for(line, "kernel")
    if isinstance(op, Help):
        _show_text(HELP + "\n" + KERNEL_HELP)
        return
    session = front.ensure_session()
    if isinstance(op, Jobs):
        _show_jobs(front, session)
        return
    if isinstance(op, Logs):
        _show_logs(front, session, op)
        return
    if isinstance(op, Resume) and op.session_id is None:  # the notebook's own session, never another's
        target, why = resume_target(session, front.notebook)
        if why:
            _show_text(why)
            return
        if target:
            op = Resume(session_id=target)
    show_result(front, session, await submit(session, op, front="kernel"))
    if isinstance(op, Tools | Trust | Cd):
        from crystal_kernel.jupyter.render import IPythonOutput
        from crystal_kernel.jupyter.trust_view import offer_trust

        session = front.ensure_session()
        assert front.state is not None  # attached with the session
        offer_trust(session, front.state, IPythonOutput())  # TRUST-2: a Trust button


def show_result(front: NotebookFront, session: Session, result: answers.CommandResult) -> None:
    """A command's answer in a cell: /sessions named by notebook, the kernel moved to a
    fork, a resumed or forked session remembered for this notebook; otherwise the text."""
    match result:
        case answers.SessionsResult(sessions=rows) if rows:
            _show_text(sessions_by_notebook(session, list(rows)))
        case answers.Forked():
            front.attach(result.session)
            front.remember()
            _show_text(result.text)
        case answers.Resumed():
            front.remember()
            _show_text(result.text)
        case (answers.TextResult() | answers.HelpResult() | answers.JobsResult() | answers.LogsResult()
              | answers.SessionsResult() | answers.UsageResult()):
            _show_text(result.text)
        case _:
            assert_never(result)


def _show_jobs(front: NotebookFront, session: Session) -> None:
    from crystal_kernel.jupyter.jobs_view import JobsTable, jobs_table
    from crystal_kernel.jupyter.render import IPythonOutput

    output = IPythonOutput()
    if not session.has_jobs or not session.jobs.status():
        output.show(jobs_table([]))
        return
    table = JobsTable(session.jobs, output)
    if not table.done:
        front.spawn(table.keep_fresh())


def _show_logs(front: NotebookFront, session: Session, op: Logs) -> None:
    from crystal_kernel.jupyter.jobs_view import LogView
    from crystal_kernel.jupyter.render import IPythonOutput

    if not session.has_jobs:
        raise UserError(f"No background job '{op.job_id}' in this session (jobs: none).")
    view = LogView(session.jobs, op.job_id, IPythonOutput())
    if op.follow and view.info.active:
        front.spawn(view.follow())
