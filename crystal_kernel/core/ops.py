"""What a front can ask of a session: one typed union in, as :data:`~crystal_kernel.core.events.Event`
is one typed union out (SPEC §11, docs/architecture.md "Ops in, events out").

A front turns what the person typed into an :data:`Op`: a prompt is a :class:`UserTurn`,
a slash command line goes through :func:`parse_command`, which checks its shape (the
words it takes) and says what is wrong in one English line (a ``UserError``). The host
runs an op with ``host.commands.submit``, a ``match`` over the union that ends in
``assert_never``: an op added here fails type checking there until it is handled
(tests/host/test_ops_exhaustive.py proves it). Values are checked where they are used
(a mode's name by the session, a folder by the access rules), so each check stays in
one place.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from crystal_kernel.core.errors import UserError
from crystal_kernel.core.messages import Part


class _Op(BaseModel):
    # Frozen like the events: an op is a value a front hands over, never edited after.
    model_config = ConfigDict(frozen=True)


class UserTurn(_Op):
    """A prompt: the person's text (with attached files as parts) for one turn."""

    prompt: str | list[Part]


class Help(_Op):
    """``/help``: the commands this front offers."""


class ShowSetting(_Op):
    """``/mode``, ``/approval``, ``/model`` or ``/reasoning`` with no value: say the current one."""

    setting: Literal["mode", "approval", "model", "reasoning"]


class SetMode(_Op):
    """``/mode plan|work`` (MODE-4; saved as the person's default, FL-5)."""

    mode: str


class SetApproval(_Op):
    """``/approval MODE`` (saved as the person's default, FL-5)."""

    approval: str


class SetModel(_Op):
    """``/model [PROVIDER:]MODEL`` (FL-6; saved as the person's default, FL-5)."""

    spec: str


class SetReasoning(_Op):
    """``/reasoning EFFORT``: none, low, medium, high or default (SPEC §12)."""

    effort: str


class Cd(_Op):
    """``/cd DIR``: change the workspace root."""

    path: str


class Access(_Op):
    """``/access``: list the directories besides the workspace, and the sandbox."""


class AddAccess(_Op):
    """``/access add DIR [ro|rw]`` (TRUST-6: the one check of added folders)."""

    path: str
    mode: Literal["ro", "rw"] = "rw"


class RemoveAccess(_Op):
    """``/access remove DIR``."""

    path: str


class PromptSet(_Op):
    """``/promptset [NAME]`` (alias ``/prompts``): list prompt sets, or switch to one."""

    name: str | None = None


class PromptAttach(_Op):
    """``/promptattach [enable|disable|up|down NAME]``: list or change prompt attachments."""

    action: Literal["enable", "disable", "up", "down"] | None = None
    name: str = ""


class Todos(_Op):
    """``/todos``: the session's todo list."""


class Jobs(_Op):
    """``/jobs``: the session's background jobs."""


class Logs(_Op):
    """``/logs JOB [--follow]``: a job's newest output (live, in fronts that can)."""

    job_id: str
    follow: bool = False


class Stop(_Op):
    """``/stop JOB``: stop a background job and its whole process tree (BG-1)."""

    job_id: str


class Compact(_Op):
    """``/compact [FOCUS…]``: summarise the older conversation now."""

    focus: str | None = None


class Sessions(_Op):
    """``/sessions``: the saved sessions of this workspace (TRUST-7 marks unsigned ones)."""


class Resume(_Op):
    """``/resume [ID]``: continue a saved session (None: the latest)."""

    session_id: str | None = None


class Fork(_Op):
    """``/fork``: continue in a copy of this session; the original stays saved."""


class Usage(_Op):
    """``/usage``: tokens (and cost) so far."""


class Tools(_Op):
    """``/tools``: the tools this session offers."""


class Trust(_Op):
    """``/trust [list | FILE | all]`` (TRUST-2, TRUST-5)."""

    target: str = "list"


#: Every slash command, as an op. Adding a member fails ``mypy`` in ``host.commands.submit``
#: until it is handled (tests/host/test_ops_exhaustive.py).
Command = (Help | ShowSetting | SetMode | SetApproval | SetModel | SetReasoning | Cd | Access | AddAccess
           | RemoveAccess | PromptSet | PromptAttach | Todos | Jobs | Logs | Stop | Compact | Sessions | Resume
           | Fork | Usage | Tools | Trust)

#: Everything a front can ask of a session.
Op = UserTurn | Command

def split_command(line: str) -> tuple[str, list[str]]:
    """``/name arg …`` -> (name, args), shell-quoted as typed; a UserError when it is no command."""
    try:
        words = shlex.split(line.strip())
    except ValueError as exc:
        raise UserError(f"Cannot parse the command: {exc}.") from None
    if not words or not words[0].startswith("/"):
        raise UserError("A command starts with '/'.")
    return words[0][1:], words[1:]


def parse_command(line: str) -> Command:
    """The op one slash command line asks for. Wrong words (too many, an unknown option,
    an unknown command) are a UserError of one line saying the usage."""
    name, args = split_command(line)
    parser = _PARSERS.get(name)
    if parser is None:
        raise UserError(f"Unknown command /{name}; /help lists the commands.")
    return parser(args)


def _setting(name: Literal["mode", "approval", "model", "reasoning"], args: list[str]) -> Command:
    # Words after the value were never read, and still are not.
    if not args:
        return ShowSetting(setting=name)
    if name == "mode":
        return SetMode(mode=args[0])
    if name == "approval":
        return SetApproval(approval=args[0])
    return SetModel(spec=args[0])


def _reasoning(args: list[str]) -> Command:
    if len(args) > 1:
        raise UserError("Usage: /reasoning [none|low|medium|high|default]")
    return SetReasoning(effort=args[0]) if args else ShowSetting(setting="reasoning")


def _cd(args: list[str]) -> Command:
    if len(args) != 1:
        raise UserError("Usage: /cd DIR")
    return Cd(path=args[0])


def _access(args: list[str]) -> Command:
    if not args:
        return Access()
    if args[0] == "add" and len(args) in (2, 3):
        if len(args) == 2 or args[2] == "rw":
            return AddAccess(path=args[1], mode="rw")
        if args[2] == "ro":
            return AddAccess(path=args[1], mode="ro")
        raise UserError("Usage: /access add DIR [ro|rw]")
    if args[0] == "remove" and len(args) == 2:
        return RemoveAccess(path=args[1])
    raise UserError("Usage: /access [add DIR [ro|rw] | remove DIR]")


def _promptset(args: list[str]) -> Command:
    if len(args) > 1:
        raise UserError("Usage: /promptset [NAME | default]")
    return PromptSet(name=args[0] if args else None)


def _promptattach(args: list[str]) -> Command:
    if not args:
        return PromptAttach()
    action = args[0]
    if len(args) != 2 or action not in ("enable", "disable", "up", "down"):
        raise UserError("Usage: /promptattach [enable|disable|up|down NAME]")
    # The Literal is proved by the check above; pydantic checks it again.
    return PromptAttach.model_validate({"action": action, "name": args[1]})


def _jobs(args: list[str]) -> Command:
    if args:
        raise UserError("Usage: /jobs")
    return Jobs()


def _logs(args: list[str]) -> Command:
    follow = False
    rest = []
    for word in args:
        if word in ("--follow", "-f"):
            follow = True
        elif word.startswith("-"):
            raise UserError(f"/logs: unknown option {word}; usage: /logs JOB [--follow]")
        else:
            rest.append(word)
    if len(rest) != 1:
        raise UserError("Usage: /logs JOB [--follow]")
    return Logs(job_id=rest[0], follow=follow)


def _stop(args: list[str]) -> Command:
    if len(args) != 1:
        raise UserError("Usage: /stop JOB")
    return Stop(job_id=args[0])


def _trust(args: list[str]) -> Command:
    if len(args) > 1:
        raise UserError("Usage: /trust [list | FILE | all]")
    return Trust(target=args[0] if args else "list")


# Commands that take no words read none (so ``/help me`` is /help, as it always was).
_PARSERS: dict[str, Callable[[list[str]], Command]] = {
    "help": lambda args: Help(),
    "mode": lambda args: _setting("mode", args),
    "approval": lambda args: _setting("approval", args),
    "model": lambda args: _setting("model", args),
    "reasoning": _reasoning,
    "cd": _cd,
    "access": _access,
    "promptset": _promptset,
    "prompts": _promptset,
    "promptattach": _promptattach,
    "todos": lambda args: Todos(),
    "jobs": _jobs,
    "logs": _logs,
    "stop": _stop,
    "compact": lambda args: Compact(focus=" ".join(args).strip() or None),
    "sessions": lambda args: Sessions(),
    "resume": lambda args: Resume(session_id=args[0] if args else None),
    "fork": lambda args: Fork(),
    "usage": lambda args: Usage(),
    "tools": lambda args: Tools(),
    "trust": _trust,
}

#: The names :func:`parse_command` knows, aliases included (``/expand`` is the terminal's own).
COMMAND_NAMES: tuple[str, ...] = tuple(_PARSERS)
