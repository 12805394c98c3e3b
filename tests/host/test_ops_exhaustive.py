"""Ops in, answers out: every slash command is one typed op, every answer one typed kind,
and both unions are matched exhaustively (SPEC §11; docs/architecture.md "Ops in, events out").

A front parses what the person typed (core/ops.py ``parse_command``) and hands the op to
``host.commands.submit``, a ``match`` over the op union ending in ``assert_never``. A
command answers one of ``host.command_results.CommandResult``; the fronts that run
commands (ACP's ``command_markdown``, the terminal's ``Repl._command``, the notebook's
``show_result``) match it and end in ``assert_never``. Proofs:

- at run time, every command line parses to its op, bad lines are one English line,
  and every op of the union is answered by a real session;
- statically, mypy run with an op added to the union fails in ``submit``, and with an
  answer added fails in each front (so neither can go unnoticed).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from crystal_kernel.core import ops
from crystal_kernel.core.commands import HelpResult, JobsResult, Resumed, SessionsResult, TextResult, UsageResult
from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.host.command_results import CommandResult, Forked
from crystal_kernel.host.commands import ROWS, run_command, submit
from crystal_kernel.host.session import Session
from crystal_kernel.testing.scripted import ScriptedProvider, text_reply

REPO = Path(__file__).resolve().parents[2]

# Each command line a person can type, and the op it is.
LINES: dict[str, ops.Command] = {
    "/help": ops.Help(),
    "/mode": ops.ShowSetting(setting="mode"),
    "/mode plan": ops.SetMode(mode="plan"),
    "/approval edit": ops.SetApproval(approval="edit"),
    "/model openai:gpt-5": ops.SetModel(spec="openai:gpt-5"),
    "/reasoning default": ops.SetReasoning(effort="default"),
    "/cd 'my dir'": ops.Cd(path="my dir"),
    "/access": ops.Access(),
    "/access add ~/data ro": ops.AddAccess(path="~/data", mode="ro"),
    "/access add data": ops.AddAccess(path="data", mode="rw"),
    "/access remove data": ops.RemoveAccess(path="data"),
    "/prompts terse": ops.PromptSet(name="terse"),
    "/promptattach up style": ops.PromptAttach(action="up", name="style"),
    "/todos": ops.Todos(),
    "/jobs": ops.Jobs(),
    "/logs j1 -f": ops.Logs(job_id="j1", follow=True),
    "/stop j1": ops.Stop(job_id="j1"),
    "/compact  focus on   tests ": ops.Compact(focus="focus on tests"),
    "/sessions": ops.Sessions(),
    "/resume": ops.Resume(),
    "/fork": ops.Fork(),
    "/usage": ops.Usage(),
    "/tools": ops.Tools(),
    "/trust all": ops.Trust(target="all"),
}

# Lines a person may mistype, and the one line each is answered with.
BAD_LINES = {
    "mode plan": "A command starts with '/'.",
    "/mode 'plan": "Cannot parse the command: No closing quotation.",
    "/nosuch": "Unknown command /nosuch; /help lists the commands.",
    "/cd": "Usage: /cd DIR",
    "/cd a b": "Usage: /cd DIR",
    "/access add data rx": "Usage: /access add DIR [ro|rw]",
    "/access drop data": "Usage: /access [add DIR [ro|rw] | remove DIR]",
    "/reasoning low high": "Usage: /reasoning [none|low|medium|high|default]",
    "/promptset a b": "Usage: /promptset [NAME | default]",
    "/promptattach sideways style": "Usage: /promptattach [enable|disable|up|down NAME]",
    "/jobs all": "Usage: /jobs",
    "/logs": "Usage: /logs JOB [--follow]",
    "/logs j1 --tail": "/logs: unknown option --tail; usage: /logs JOB [--follow]",
    "/stop": "Usage: /stop JOB",
    "/trust a b": "Usage: /trust [list | FILE | all]",
}


def test_every_command_line_parses_to_its_op():
    assert {line: ops.parse_command(line) for line in LINES} == LINES
    assert {type(op) for op in LINES.values()} | {ops.ShowSetting} == set(get_args(ops.Command))


def test_help_lists_every_command_the_parser_knows():
    """/help's rows and parse_command name the same commands (the terminal's /expand is
    its own, never the host's)."""
    listed = {name for row in ROWS for name in row.names()}
    assert listed - set(ops.COMMAND_NAMES) == {"expand"}
    assert set(ops.COMMAND_NAMES) == listed - {"expand"}
    with pytest.raises(UserError, match=r"^Unknown command /expand;"):
        ops.parse_command("/expand 2")


@pytest.mark.parametrize("line", sorted(BAD_LINES))
def test_a_mistyped_command_is_one_english_line(line):
    with pytest.raises(UserError) as caught:
        ops.parse_command(line)
    assert str(caught.value) == BAD_LINES[line]


def test_a_command_another_front_answers_is_refused_by_name(workspace, private_home):
    session = Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([]))
    with pytest.raises(UserError, match=r"^/fork is not available here: open or start sessions from your client"):
        asyncio.run(run_command(session, "/fork extra words", front="acp"))


def test_a_session_answers_every_op(workspace, private_home):
    """A prompt, then one op of each kind through ``submit`` on a real session: the
    turn's events, and each answer's kind and text."""
    (workspace / "data").mkdir()
    (workspace / "sub").mkdir()

    async def run() -> dict[str, CommandResult]:
        session = Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([text_reply("Hi.")]))
        turn = await submit(session, ops.UserTurn(prompt="Say hi."))  # a prompt is an op too: a turn
        kinds = [type(event).__name__ async for event in turn]
        assert kinds[0] == "TurnStarted" and "TextDelta" in kinds and kinds[-1] == "TurnEnd"
        assert turn.stop_reason == "end_turn" and session.transcript[-1].text() == "Hi."
        answers: dict[str, CommandResult] = {}
        commands: list[tuple[str, ops.Command]] = [
            ("help", ops.Help()), ("show", ops.ShowSetting(setting="approval")), ("mode", ops.SetMode(mode="plan")),
            ("approval", ops.SetApproval(approval="edit")), ("reasoning", ops.SetReasoning(effort="low")),
            ("add", ops.AddAccess(path="data", mode="ro")), ("access", ops.Access()), ("remove", ops.RemoveAccess(path="data")),
            ("promptset", ops.PromptSet()), ("promptattach", ops.PromptAttach()), ("todos", ops.Todos()), ("jobs", ops.Jobs()),
            ("compact", ops.Compact()), ("usage", ops.Usage()), ("tools", ops.Tools()), ("trust", ops.Trust()),
        ]
        for name, op in commands:
            answers[name] = await submit(session, op, front="kernel")
        answers["sessions"] = await submit(session, ops.Sessions())  # the turn saved it
        fork = answers["fork"] = await submit(session, ops.Fork())
        assert isinstance(fork, Forked) and fork.session.id != session.id
        fork.session.save()
        await fork.session.close()  # its lock given back: the first session may take it up
        answers["resume"] = await submit(session, ops.Resume(session_id=fork.session.id))
        answers["cd"] = await submit(session, ops.Cd(path="sub"))
        for op in (ops.Logs(job_id="j9"), ops.Stop(job_id="j9"), ops.SetModel(spec="nosuch:model")):
            with pytest.raises(UserError):
                await submit(session, op)
        await session.close()
        return answers

    answers = asyncio.run(run())
    assert isinstance(answers["help"], HelpResult) and "/fork" in answers["help"].text
    assert ("(/prompts)",) in [usages[1:] for usages, _ in answers["help"].rows]
    assert answers["show"] == TextResult("Approval: default")
    assert answers["mode"].text.startswith("Mode is now plan. Saved as your default in ")
    assert answers["approval"].text.startswith("Approval mode is now edit.")
    assert answers["reasoning"].text.startswith("Reasoning is now low.")
    assert answers["add"] == TextResult(f"Added {workspace / 'data'} (ro).")
    assert f"{workspace / 'data'} (ro)" in answers["access"].text
    assert answers["remove"] == TextResult("Removed data.")
    assert answers["todos"] == TextResult("No todos.")
    assert isinstance(answers["jobs"], JobsResult) and answers["jobs"].jobs == ()
    assert answers["compact"].text.startswith("Nothing to compact yet")
    assert isinstance(answers["usage"], UsageResult) and answers["usage"].usage["turns"] == 1
    assert "read" in answers["tools"].text
    assert isinstance(answers["sessions"], SessionsResult) and len(answers["sessions"].sessions) == 1
    assert isinstance(answers["resume"], Resumed) and answers["resume"].text.startswith("Resumed session ")
    assert answers["cd"] == TextResult(f"Workspace is now {workspace / 'sub'}.")


def _mypy_copy(tmp_path: Path, files: dict[str, str]) -> list[str]:
    """mypy on copies of ``files`` (path -> text) alone; the rest of crystal_kernel is
    skipped (Any), pydantic and typing are followed. Returns the error lines."""
    package = tmp_path / "crystal_kernel"
    for folder in ("", "core", "host", "jupyter", "acp", "cli"):
        (package / folder).mkdir(parents=True, exist_ok=True)
        (package / folder / "__init__.py").write_text("")
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    (tmp_path / "mypy.ini").write_text("[mypy]\nignore_missing_imports = true\n"
                                       "[mypy-crystal_kernel.*]\nfollow_imports = skip\n"
                                       "[mypy-acp.*]\nfollow_imports = skip\n"
                                       "[mypy-prompt_toolkit.*]\nfollow_imports = skip\n")
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir", str(tmp_path / "cache"), *files],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return [line for line in checked.stdout.splitlines() if ": error:" in line] or [checked.stdout + checked.stderr]


def _added(path: str, union: str, added: str) -> str:
    """The module at ``path`` with the class ``added`` (named Surprise) put first in ``union``."""
    text = (REPO / path).read_text()
    found = re.search(rf"^{union} = \(?", text, re.MULTILINE)
    assert found is not None, f"{path}: no '{union} = ' line"
    opening = found.group(0)
    return text[:found.start()] + added + "\n\n" + opening + "Surprise | " + text[found.end():]


def test_an_op_added_to_the_union_fails_mypy_in_submit(tmp_path):
    ops = _added("crystal_kernel/core/ops.py", "Command", "class Surprise(_Op):\n    pass\n")
    files = {"crystal_kernel/core/ops.py": ops}
    for path in ("crystal_kernel/core/commands.py", "crystal_kernel/host/command_results.py",
                 "crystal_kernel/host/commands.py"):
        files[path] = (REPO / path).read_text()
    errors = _mypy_copy(tmp_path, files)
    assert len(errors) == 1 and errors[0].startswith("crystal_kernel/host/commands.py:"), errors
    assert '"assert_never" has incompatible type "Surprise"' in errors[0], errors


# Each front that runs commands, and how many exhaustive matches of the answers it holds.
FRONTS = {
    "crystal_kernel/acp/commands.py": 1,  # command_markdown
    "crystal_kernel/cli/interactive.py": 1,  # Repl._command
    "crystal_kernel/jupyter/cell_commands.py": 1,  # show_result: kernel cells and %crystal /command
}


def test_an_answer_added_to_the_union_fails_mypy_in_every_front(tmp_path):
    added = ("@dataclass(frozen=True)\nclass Surprise:\n    text: str\n")
    files = {"crystal_kernel/host/command_results.py":
             _added("crystal_kernel/host/command_results.py", "CommandResult", added)}
    files["crystal_kernel/core/commands.py"] = (REPO / "crystal_kernel/core/commands.py").read_text()
    for front in FRONTS:
        files[front] = (REPO / front).read_text()
    errors = _mypy_copy(tmp_path, files)
    assert all('"assert_never" has incompatible type "Surprise"' in line for line in errors), errors
    found = {front: sum(line.startswith(front + ":") for line in errors) for front in FRONTS}
    assert found == FRONTS, errors


def test_no_front_reads_an_answer_by_string():
    """Fronts match the answer's kind; none reads ``kind`` or ``data`` by string, and no
    module takes an untyped session (the grep of the issue's 'done when')."""
    pattern = re.compile(r"result\.kind ==|result\.data\[|session: object|_get\(session")
    found = [f"{path.relative_to(REPO)}:{n}" for path in sorted((REPO / "crystal_kernel").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
