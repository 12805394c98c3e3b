"""The session's background shell tools (SPEC §4, MODE-2): bash_start, bash_status,
bash_logs, bash_stop. They drive ``ctx.jobs`` (a
:class:`crystal_kernel.jobs.manager.JobManager`).

Risk: bash_start runs a command, so it is EXECUTE (and, like bash, the command is what
a person may allow for the session). bash_stop is WRITE: it can only end processes this
session itself started, which changes state but runs nothing new. bash_status and
bash_logs are READ.
"""

from __future__ import annotations

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.jobs.format import describe_job, job_table, logs_header
from crystal_kernel.jobs.sandbox import refusal_note
from crystal_kernel.tools._sandbox import tool_sandbox
from crystal_kernel.tools.base import Classification, Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output


def _note_change(ctx: ToolContext) -> None:
    """Jobs may change files at any time: the next search refreshes its index."""
    try:
        from crystal_kernel.tools._index import note_change
    except ImportError:  # pragma: no cover - the search tool is optional
        return
    note_change(ctx.workspace)


class BashStartInput(ToolInput):
    command: str = Field(description="The shell command.")


MAX_WAIT_SECONDS = 120


class BashStatusInput(ToolInput):
    job_id: str | None = Field(default=None, description="A job id such as j1.")
    wait_seconds: float | None = Field(
        default=None, ge=0, le=MAX_WAIT_SECONDS,
        description="With job_id: wait up to this long for the job to end first.",
    )


class BashLogsInput(ToolInput):
    job_id: str = Field(description="A job id such as j1.")
    offset: int | None = Field(
        default=None, ge=0,
        description="The byte offset to read from; omit it for the newest output.",
    )
    limit: int | None = Field(
        default=None, ge=1,
        description="Most bytes to return (default and maximum: the tool output limit).",
    )


class BashStopInput(ToolInput):
    job_id: str = Field(description="A job id such as j1.")


class BashStartTool(Tool[BashStartInput]):
    name = "bash_start"
    Input = BashStartInput
    risk = Risk.EXECUTE
    sandboxed = True

    def classify(self, args: BashStartInput, ctx: ToolContext) -> Classification:
        return Classification(self.risk, pattern=args.command)

    async def run(self, args: BashStartInput, ctx: ToolContext) -> ToolResult:
        sandbox = tool_sandbox(ctx)
        info = ctx.jobs.start(args.command, cwd=ctx.workspace, sandbox=sandbox)
        _note_change(ctx)
        return ToolResult(ok=True, text=(
            f"Started background job {info.id} (pid {info.pid}) in {ctx.workspace}.\n"
            f"Check it with bash_status {{\"job_id\": \"{info.id}\"}}, read its output with bash_logs, "
            f"and end it with bash_stop."
        ))


class BashStatusTool(Tool[BashStatusInput]):
    name = "bash_status"
    Input = BashStatusInput
    risk = Risk.READ

    def waits(self, args: BashStatusInput) -> bool:
        return bool(args.wait_seconds)

    async def run(self, args: BashStatusInput, ctx: ToolContext) -> ToolResult:
        jobs = ctx.jobs
        if args.wait_seconds:
            if args.job_id is None:
                raise ToolError("wait_seconds needs a job_id.")
            await jobs.wait(args.job_id, timeout=args.wait_seconds)
        _note_change(ctx)
        if args.job_id is not None:
            text = describe_job(jobs.status(args.job_id))
        else:
            text = job_table(jobs.status(), limit=jobs.max_active)
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))


class BashLogsTool(Tool[BashLogsInput]):
    name = "bash_logs"
    Input = BashLogsInput
    risk = Risk.READ

    async def run(self, args: BashLogsInput, ctx: ToolContext) -> ToolResult:
        jobs = ctx.jobs
        budget = max(256, ctx.config.tool_output_limit - 400)  # room for the header
        limit = min(args.limit or budget, budget)
        chunk = jobs.logs(args.job_id, args.offset, limit)
        info = jobs.status(args.job_id)
        _note_change(ctx)
        text = logs_header(info, chunk) + "\n" + (chunk.text if chunk.text else "(no output in this range)")
        refused = refusal_note(jobs.sandbox_of(args.job_id), info.exit_code != 0, chunk.text)
        if refused:
            text += "\n\n" + refused
        return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit), display="terminal")


class BashStopTool(Tool[BashStopInput]):
    name = "bash_stop"
    Input = BashStopInput
    risk = Risk.WRITE

    async def run(self, args: BashStopInput, ctx: ToolContext) -> ToolResult:
        jobs = ctx.jobs
        before = jobs.status(args.job_id)
        info = await jobs.astop(args.job_id)
        _note_change(ctx)
        if before.state != "running":
            return ToolResult(ok=True, text=f"Job {info.id} had already ended.\n" + describe_job(info))
        return ToolResult(ok=True, text=f"Stopped job {info.id} and every process it started.\n" + describe_job(info))
