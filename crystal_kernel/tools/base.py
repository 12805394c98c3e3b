"""The tool framework.

A tool has a name, a model-facing description kept in ``<name>.md`` beside its module,
a pydantic input model (its JSON schema is what the model sees), a host risk and
authority per call, and an async ``run``. ``run`` raises :class:`ToolError` for
failures the model should read; the loop turns anything else into a failed result
marked as an internal error.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.notebook import LiveNotebookEdit, NotebookAttachment
from crystal_kernel.core.todos import Todo
from crystal_kernel.core.tool_types import (
    Authority,
    Classification,
    FileChange,
    Risk,
    ToolResult,
    ToolSpec,
    truncate_output,
)

if TYPE_CHECKING:
    from crystal_kernel.core.interaction import Interaction
    from crystal_kernel.jobs.manager import JobManager
    from crystal_kernel.providers.base import Provider

# A plugin's tool needs only this module (docs/plugins.md): the call vocabulary that
# lives in core is re-exported here for tool authors.
__all__ = [
    "Authority", "Classification", "ComposePrompt", "EmptyInput", "FileChange", "LiveNotebookEdit", "NotebookAttachment", "Risk",
    "Tool", "ToolContext", "ToolInput", "ToolResult", "ToolSpec", "format_validation_error", "input_schema",
    "truncate_output",
]

# Composes a named prompt (image.system, image.user, ...) for the session, with the
# per-call slots (PH-7) in the dict.
ComposePrompt = Callable[[str, "dict[str, str] | None"], str]


@dataclass
class ToolContext:
    """What a running tool may use: the parts of the session it needs, never the session.

    The host builds one per call (``Session.tool_context``); a test or a script builds
    one from the parts. Tools sit below the host and never import it
    (docs/architecture.md)."""

    access: AccessRules
    config: Config
    interaction: Interaction
    call_id: str = ""
    # Whether the model of this turn accepts images (EX-12, view_image).
    images_ok: bool = True
    # Report progress (progress, total, message) to the fronts; callable from any
    # thread (MCP calls run on their own loop). None: nobody listens.
    progress: Callable[[float, float | None, str | None], None] | None = None
    # EX-2: what a child process learns about the session (CRYSTAL_SESSION, CRYSTAL_APPROVAL).
    session_id: str = ""
    approval: str = "default"
    # The session's todo list (MODE-5), read here; todowrite replaces it through
    # ``write_todos``, the session's own method (None: a bare context keeps its own list).
    todos: list[Todo] = field(default_factory=list)
    write_todos: Callable[[list[Todo]], None] | None = None
    # The session's background jobs (SPEC §4), made on first use; None: no jobs here.
    open_jobs: Callable[[], JobManager] | None = None
    # The IPython shell of the notebook hosting the session (notebook tools), if any.
    # Typed loosely: below the jupyter front nothing imports IPython.
    notebook_shell: Any = None
    live_notebook_edit: LiveNotebookEdit | None = None
    # The session's model (describe_image asks it when no imageModel is set) and the
    # session's prompt composer; None where no session composes (a bare context).
    model: Provider | None = None
    compose_prompt: ComposePrompt | None = None

    @property
    def workspace(self) -> Path:
        return self.access.workspace

    @property
    def home(self) -> Path:
        """Crystal Home (config.json, trust, the person's own tool sets and skills)."""
        return self.config.home

    def replace_todos(self, todos: list[Todo]) -> None:
        """todowrite's new list: the session replaces its own (tools never write it)."""
        if self.write_todos is None:
            self.todos = list(todos)
        else:
            self.write_todos(todos)

    @property
    def jobs(self) -> JobManager:
        """The session's background jobs; ToolError where the host offers none."""
        if self.open_jobs is None:
            raise ToolError("Background jobs are not available here.")
        return self.open_jobs()

    if not TYPE_CHECKING:  # hidden from the type checker: ``ctx.anything`` stays an error there

        def __getattr__(self, name: str) -> Any:
            # Only for names the context lacks: a tool written when the context carried
            # the whole Session learns what replaced it (docs/plugins.md).
            if name == "session":
                raise AttributeError(
                    "ToolContext has no 'session': a tool receives the parts it uses (ctx.workspace, "
                    "ctx.access, ctx.config, ctx.home, ctx.todos, ctx.jobs, ctx.session_id, ...); "
                    "see docs/plugins.md.")
            raise AttributeError(f"'ToolContext' object has no attribute '{name}'")


class ToolInput(BaseModel):
    """Base of every tool's input model: unknown arguments are refused."""

    model_config = ConfigDict(extra="forbid")


class EmptyInput(ToolInput):
    pass


InputT = TypeVar("InputT", bound=BaseModel)


class Tool(Generic[InputT]):
    """Base class of built-in tools. Subclasses set ``name``, ``Input``, ``risk`` and
    implement ``run``; the description is read from ``<name>.md`` beside the module.
    ``Tool[MyInput]`` types ``run`` and ``classify`` with the tool's own input model."""

    # Set on the class by a built-in tool, per instance by a tool made at run time
    # (an exec set's or an MCP server's).
    name: str
    if TYPE_CHECKING:
        # The tool's own input model: ``Tool[MyInput]`` sets ``Input = MyInput``, so
        # ``parse`` returns a ``MyInput``.
        Input: type[InputT]
    else:
        # A tool that takes no arguments may leave it out.
        Input = EmptyInput
    risk: ClassVar[Risk] = Risk.READ
    external: ClassVar[bool] = False
    input_kind: Literal["json", "text"] = "json"
    # Path-bearing argument names; their authority decides the call's authority.
    path_arguments: ClassVar[tuple[str, ...]] = ()
    # SANDBOX-1: the tool starts processes that run in the sandbox (bash, jobs, exec
    # sets, notebook_run); without one, approval asks for them in every mode.
    sandboxed: ClassVar[bool] = False
    # SANDBOX-1: where the tool runs the model's code when that is outside any sandbox
    # (the python tool: "in the kernel", the kernel's own process). The loop copies it
    # into the call's Classification; approval then asks a person in every mode, full and
    # review included, and the form says so. Empty: the tool runs no code of the model's,
    # or runs it in the sandbox (``sandboxed``).
    runs_unsandboxed: ClassVar[str] = ""
    # ROBUST-3: ``classify`` reads the files the call names (the diff a person approves,
    # GUARD-4), so the loop runs it in a worker thread: a file system that stops answering
    # must not hold the event loop (and with it the cancel) before the tool even starts.
    classify_reads_files: ClassVar[bool] = False

    @property
    def description(self) -> str:
        cls = type(self)
        text = _descriptions.get(cls)
        if text is None:
            text = _descriptions[cls] = _read_description(cls, cls.name)
        return text

    def input_schema(self) -> dict[str, Any]:
        return input_schema(self.Input)

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.input_schema(), self.input_kind)

    def parse(self, arguments: dict[str, Any]) -> InputT:
        """Validate arguments; a failure is a ToolError the model can act on."""
        try:
            return self.Input.model_validate(arguments)
        except ValidationError as exc:
            raise ToolError(format_validation_error(self.name, exc)) from None

    def classify(self, args: InputT, ctx: ToolContext) -> Classification:
        authority = Authority.WORKSPACE
        pattern = None
        host_owned = False
        for arg in self.path_arguments:
            value = getattr(args, arg, None)
            if value:
                pattern = str(value)
                if not ctx.access.in_workspace(value):
                    authority = Authority.OUTSIDE
                if self.risk >= Risk.WRITE and ctx.access.is_host_owned(value, ctx.home):
                    host_owned = True
        if host_owned:  # TRUST-3: outside-level authority that always asks the person
            authority = Authority.OUTSIDE
        return Classification(self.risk, authority, self.external, pattern, host_owned=host_owned)

    def waits(self, args: InputT) -> bool:
        """Whether the call waits for something outside the reply (a job to end). The
        calls a model puts after such a call in the same reply may depend on what it
        waits for, so the loop runs it alone, never beside its neighbours."""
        return False

    async def run(self, args: InputT, ctx: ToolContext) -> ToolResult:  # pragma: no cover
        raise NotImplementedError


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema the model sees: inline, no titles, no $defs where avoidable.

    A fresh copy each call; the generated schema is cached per model class because
    pydantic's generation costs about a millisecond per tool and runs every request."""
    return copy.deepcopy(_input_schema(model))


@cache
def _input_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})
    # A model's own "description" is its class docstring, written for programmers, not
    # for the model; what the model should read is the tool description and the
    # Field(description=...) at each use site.
    schema.pop("description", None)

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = {k: v for k, v in defs[node["$ref"].split("/")[-1]].items() if k != "description"}
                return inline({**target, **{k: v for k, v in node.items() if k != "$ref"}})
            node = _plain_optional(node)
            return {k: inline(v) for k, v in node.items() if k != "title" and not _closed_marker(k, v)}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    out: dict[str, Any] = inline(schema)  # a dict inlines to a dict
    out.setdefault("properties", {})
    out["type"] = "object"
    return out


def _closed_marker(key: str, value: Any) -> bool:
    """``additionalProperties: false`` (every :class:`ToolInput` has it, nested models
    too) is left out of what the model sees: about 5 tokens per object on every request
    (a tenth of the tool schemas) that change no call, since the input model refuses an
    unknown argument anyway, with an error naming it. A schema-valued
    ``additionalProperties`` (a ``dict[str, X]`` field) says what values look like and stays."""
    return key == "additionalProperties" and value is False


def _plain_optional(node: dict[str, Any]) -> dict[str, Any]:
    """``X | None = None`` is sent as plain ``X``: the argument is optional because it is
    not required, and ``anyOf [X, null]`` with ``default: null`` costs about 15 tokens
    per argument on every request while telling the model nothing more. (A null sent
    anyway still validates: the input model accepts None.)"""
    options = node.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options
            and "default" in node and node["default"] is None):
        return node
    other = next(o for o in options if o != {"type": "null"})
    if not isinstance(other, dict) or "$ref" in other:
        return node
    rest = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
    return {**other, **rest}


def format_validation_error(tool: str, exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return f"Invalid arguments for {tool}: " + "; ".join(problems)


# Descriptions by tool class: read once (the catalog asks for them on every request).
_descriptions: dict[type, str] = {}


def _read_description(cls: type, name: str) -> str:
    module_file = Path(inspect.getfile(cls))
    md = module_file.with_name(f"{name}.md")
    if md.exists():
        return md.read_text(encoding="utf-8").strip()
    doc = inspect.getdoc(cls)
    return doc or name
