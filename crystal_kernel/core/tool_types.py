"""The vocabulary of a tool call shared by every layer: how risky a call is, what authority
it needs, how the host classified it, what it returned, and the tool as offered to the model.

Tools, MCP, providers and the host all speak these types; none of them lives in a layer
above ``core`` (docs/architecture.md).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from crystal_kernel.core.messages import ImagePart


@dataclass(frozen=True)
class ToolSpec:
    """A tool as offered to the model."""

    name: str
    description: str
    input_schema: dict[str, Any]
    input_kind: Literal["json", "text"] = "json"



class Risk(enum.IntEnum):
    READ = 0
    WRITE = 1
    EXECUTE = 2

    def __str__(self) -> str:
        return self.name.lower()


class Authority(enum.IntEnum):
    WORKSPACE = 0
    OUTSIDE = 1

    def __str__(self) -> str:
        return "outside-workspace" if self is Authority.OUTSIDE else "workspace"


@dataclass(frozen=True)
class Classification:
    """The host's view of one call: risk, authority, and whether the tool is external
    (exec, plugin, MCP: floor write + workspace, MODE-3)."""

    risk: Risk
    authority: Authority = Authority.WORKSPACE
    external: bool = False
    # What a person may allow for the session (a bash command, a path), if anything.
    pattern: str | None = None
    # What the call would change, shown to the person asked for approval (notebook_edit's
    # per-cell diff); never sent to the model.
    preview: str | None = None
    # GUARD-4: how to make ``preview`` when it is not given. Making it reads the file, so
    # approval makes it only when a person is asked, in a worker thread (ROBUST-3): a call
    # nobody is asked about (full, auto) reads nothing for it.
    make_preview: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)
    # TRUST-3: the call changes a file that steers the host (``.crystal/``, Home): only
    # the person may allow it, in every approval mode; with nobody there it is denied.
    host_owned: bool = False
    # SANDBOX-1: the call starts processes the sandbox would confine, but the system has
    # no Landlock: a person decides in every mode, full and review included.
    unconfined: bool = False
    # SANDBOX-1: where the call runs the model's code outside any sandbox by design
    # ("in the kernel": the python tool), from the tool's ``runs_unsandboxed``; empty
    # when it runs none there. A person decides in every mode, full and review included.
    unsandboxed: str = ""


class FileChange(BaseModel):
    """The whole text of a file before and after a tool changed it, for fronts that draw
    their own diffs (ACP clients). ``old_text`` is None when the tool created the file.
    Serialized with the camelCase names ACP uses (``path``, ``oldText``, ``newText``)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, alias_generator=to_camel)

    path: str  # absolute
    old_text: str | None
    new_text: str


@dataclass
class ToolResult:
    ok: bool
    text: str = ""
    images: list[ImagePart] = field(default_factory=list)
    # How fronts should render the text: "text", "diff" or "terminal".
    display: Literal["text", "diff", "terminal"] = "text"
    # Set by edit and write; never sent to the model.
    file_change: FileChange | None = None
    # What the person is shown when it differs from what the model gets (MCP content
    # annotated for one audience): None shows ``text`` and ``images``.
    shown_text: str | None = None
    shown_images: list[ImagePart] | None = None

    @classmethod
    def fail(cls, text: str) -> ToolResult:
        return cls(ok=False, text=text)


@runtime_checkable
class ToolSource(Protocol):
    """Where a session's tools come from, with an explicit lifecycle (as pydantic-ai's
    toolsets): the session enters it before the first catalog it builds with it and
    exits it when it closes. Bootstrap builds it and hands it to the session."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: object) -> None: ...

    async def get_tools(self, session: Any) -> list[Any]:
        """The catalog for the session's mode; whatever must start first (MCP servers)
        is awaited without blocking the caller's event loop."""
        ...

    def check_disabled(self, names: Any) -> list[str]:
        """MODE-7: the ``--disable-tool`` names, checked (a UserError for an unknown one)."""
        ...


def truncate_output(text: str, limit: int) -> str:
    """Bound what the model sees; say how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    head = int(limit * 0.8)
    tail = limit - head
    cut = len(text) - head - tail
    return (
        text[:head]
        + f"\n\n[... {cut} characters cut: the output was {len(text)} characters, "
        f"the tool output limit is {limit} ...]\n\n"
        + text[-tail:]
    )
