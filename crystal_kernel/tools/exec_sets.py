"""Exec tool sets: tools that run as child processes (SPEC §1, EX-1 … EX-16).

A set is a folder with a ``tools.json`` (see :mod:`exec_manifest`); every tool in it
becomes one :class:`ExecTool`. Running a tool (:meth:`ExecTool.run`):

1. argv = set command + tool command + flags from the argv map, in manifest order
   (EX-5, EX-7); the executable is resolved against the set folder (EX-4);
2. the child starts from that list, never a shell, in the workspace, with the host's
   environment plus the five ``CRYSTAL_*`` variables and without ``CRYSTAL_HOME``
   (EX-1, EX-2); data folders are made lazily (EX-3);
3. the arguments go to stdin as UTF-8 JSON, or stdin is closed at once (EX-6, EX-9);
4. stdout and stderr are read into bounded buffers under the timeout (EX-15);
5. the output is turned into a result (:mod:`exec_output`, EX-10 … EX-16).

Timeout, cancellation and a failed stdin write kill the whole process tree
(:mod:`child_process`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import RootModel

from crystal_kernel.core import paths
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.fsutil import ensure_folder_inside
from crystal_kernel.core.trust import is_trusted
from crystal_kernel.jobs.sandbox import refusal_note
from crystal_kernel.tools._sandbox import tool_sandbox
from crystal_kernel.tools.base import Authority, Classification, Risk, Tool, ToolContext, ToolResult
from crystal_kernel.tools.child_process import run_process
from crystal_kernel.tools.exec_manifest import ExecToolManifest, has_separator
from crystal_kernel.tools.exec_output import content_result, text_result
from crystal_kernel.tools.schema_check import iter_errors

# Bytes kept per stream: the tool output limit counts characters, and a UTF-8
# character is at most four bytes.
_BYTES_PER_CHAR = 4


#: Where an exec set is installed: the person's Home or the workspace.
SetSource = Literal["home", "project"]


class ExternalArguments(RootModel[dict[str, Any]]):
    """The argument object of an external tool, kept exactly as the model sent it."""


@dataclass(frozen=True)
class ExecToolSet:
    """An installed set: its folder, manifest and shared command."""

    directory: Path
    manifest_path: Path
    command: tuple[str, ...]
    source: SetSource

    @property
    def name(self) -> str:
        return self.directory.name


class ExecTool(Tool[ExternalArguments]):
    """One tool of an exec set, offered to the model like any other (external)."""

    # The arguments as the model sent them, checked against the tool's own JSON schema (parse).
    Input = ExternalArguments
    external = True
    risk = Risk.WRITE
    sandboxed = True

    def __init__(self, tool_set: ExecToolSet, manifest: ExecToolManifest):
        self.tool_set = tool_set
        self.manifest = manifest
        self.name = manifest.name
        self.input_kind = manifest.input_kind
        self.catalogs: frozenset[str] = frozenset(manifest.catalogs)
        self._prefix: list[str] | None = None
        self._data_dirs: tuple[tuple[str, str], tuple[str, str]] | None = None

    # -- what the model sees -------------------------------------------------
    @property
    def description(self) -> str:
        return self.manifest.description or f"External tool {self.name} from the exec set '{self.tool_set.name}'."

    @property
    def origin(self) -> str:
        """Where the tool comes from, for listings."""
        return f"exec set {self.tool_set.name} ({self.tool_set.source}: {self.tool_set.manifest_path})"

    def input_schema(self) -> dict[str, Any]:
        return self.manifest.input_schema

    def parse(self, arguments: dict[str, Any]) -> ExternalArguments:
        """Arguments must be an object that satisfies the manifest's schema."""
        if not isinstance(arguments, dict):
            raise ToolError(f"Invalid arguments for {self.name}: expected a JSON object.")
        errors = list(iter_errors(arguments, self.manifest.input_schema))
        if errors:
            problems = [f"{where or 'arguments'}: {message}" for where, message in errors[:5]]
            raise ToolError(f"Invalid arguments for {self.name}: " + "; ".join(problems))
        return ExternalArguments(arguments)

    def classify(self, args: ExternalArguments, ctx: ToolContext) -> Classification:
        # MODE-3: an external tool is at least write risk with workspace authority.
        return Classification(Risk.WRITE, Authority.WORKSPACE, external=True)

    # -- running ------------------------------------------------------------
    def build_argv(self, arguments: dict[str, Any]) -> list[str]:
        """EX-5 + EX-7: set command, tool command, then mapped flags in argv-map order.
        The executable is not resolved here (see :meth:`resolve_executable`)."""
        argv = list(self.tool_set.command) + list(self.manifest.command or [])
        for prop, flag in self.manifest.argv.items():
            if prop not in arguments:
                continue
            argv.extend(_flag_values(self.name, prop, flag, arguments[prop]))
        return argv

    def resolve_executable(self, exe: str) -> str:
        """EX-4: bare name in the set folder if it exists there, else PATH; a relative
        path with a separator must stay in the set folder; absolute as given."""
        folder = Path(os.path.realpath(self.tool_set.directory))
        if os.path.isabs(exe):
            return exe
        if has_separator(exe):
            candidate = Path(os.path.realpath(folder / exe))
            if candidate != folder and folder not in candidate.parents:
                raise ToolError(f"The executable '{exe}' of {self.name} leaves its set folder; refused.")
            return str(candidate)
        local = folder / exe
        if local.is_file():
            return str(local)
        found = shutil.which(exe)
        if found is None:
            raise ToolError(f"The executable '{exe}' of {self.name} was not found in its set folder or on PATH.")
        return found

    def final_argv(self, arguments: dict[str, Any]) -> list[str]:
        """The argv the child gets: resolved prefix, tool command, mapped flags."""
        argv = self.build_argv(arguments)
        prefix = self._resolved_prefix()
        argv[: len(prefix)] = prefix
        return argv

    def _resolved_prefix(self) -> list[str]:
        """The executable resolved (EX-4) and the set command's own files made absolute,
        computed at the first run and kept for this catalog's life."""
        if self._prefix is None:
            command = list(self.tool_set.command) + list(self.manifest.command or [])
            prefix = [self.resolve_executable(command[0])]
            # The set command's own files (["python3", "mytool.py"]) live in the set
            # folder while the child runs in the workspace: make them absolute.
            folder = self.tool_set.directory
            for part in self.tool_set.command[1:]:
                if not part.startswith("-") and not os.path.isabs(part) and (folder / part).is_file():
                    part = str(folder / part)
                prefix.append(part)
            self._prefix = prefix
        return self._prefix

    def child_env(self, ctx: ToolContext) -> dict[Any, Any]:
        """EX-2: the host environment plus five variables; CRYSTAL_HOME removed, and the
        model key variables too unless passKeysToTools (TRUST-4, host/secrets.py).
        Bytes on POSIX (no decoding of every variable on each call)."""
        from crystal_kernel.core.secrets import child_environment, child_environment_bytes

        tool_data, project_data = self.data_dirs(ctx)
        extra = {
            "CRYSTAL_WORKSPACE": str(ctx.workspace),
            "CRYSTAL_SESSION": ctx.session_id,
            "CRYSTAL_APPROVAL": ctx.approval,
            "CRYSTAL_TOOL_DATA": tool_data,
            "CRYSTAL_PROJECT_DATA": project_data,
        }
        if os.supports_bytes_environ:
            return child_environment_bytes(ctx.config, extra=extra)
        return child_environment(ctx.config, extra=extra)

    def data_dirs(self, ctx: ToolContext) -> tuple[str, str]:
        """``{home}/data/tools/<set>`` and ``<workspace>/.crystal/data/tools/<set>``, each
        spelled from its resolved root: Home's ``data`` folder and the workspace, which
        the session resolved (kept for the last Home and workspace: asked twice a call).
        :func:`check_data_dir` makes sure nothing below those roots is a link."""
        key = (str(ctx.home), str(ctx.workspace))
        if self._data_dirs is None or self._data_dirs[0] != key:
            name = self.tool_set.name
            self._data_dirs = (key, (os.path.join(os.path.realpath(os.path.join(key[0], "data")), "tools", name),
                                     str(paths.tool_data_dir(ctx.workspace, name))))
        return self._data_dirs[1]

    async def run(self, args: ExternalArguments | dict[str, Any], ctx: ToolContext) -> ToolResult:
        arguments = args.root if isinstance(args, ExternalArguments) else dict(args)
        if self.tool_set.source != "home":
            # TRUST-5: the set's closure is hashed again before every run, so a file
            # written (or a link re-pointed) since the catalog was built runs nothing.
            state = await asyncio.to_thread(is_trusted, Path(ctx.home), "exec", self.tool_set.manifest_path)
            if not state.trusted:
                return ToolResult.fail(state.note())
        data_dirs = self.data_dirs(ctx)
        for folder in data_dirs:  # EX-3: lazily, failures not reported
            _ensure_folder(folder, Path(ctx.workspace))
        for folder in data_dirs:
            problem = check_data_dir(folder, Path(ctx.workspace))
            if problem:
                return ToolResult.fail(f"{self.name} was not run: {problem}")
        argv = self.final_argv(arguments)
        env = self.child_env(ctx)
        # SANDBOX-1: confined like bash, but its own data folders stay writable.
        sandbox = tool_sandbox(ctx)
        if sandbox is not None:
            # SANDBOX-2: its own folder stays readable (a Home set lies in the hidden Crystal Home).
            sandbox = sandbox.with_allowed(*data_dirs).with_programs(str(self.tool_set.manifest_path.parent),
                                                                      *program_folders(argv[0]))
        limit = int(ctx.config.tool_output_limit)
        payload = json.dumps(arguments, ensure_ascii=False).encode("utf-8") if self.manifest.stdin else None
        outcome = await run_process(argv, cwd=Path(ctx.workspace), env=env, payload=payload,
                                    timeout=self.manifest.timeout, max_bytes=limit * _BYTES_PER_CHAR,
                                    sandbox=sandbox)
        if outcome.timed_out:
            return ToolResult.fail(f"{self.name} timed out after {self.manifest.timeout:g} seconds and was stopped.")
        if outcome.stdin_failed:
            return ToolResult.fail(
                f"{self.name} stopped reading its input before the arguments were written "
                f"({outcome.stdin_failed}); the tool was stopped."
            )
        if self.manifest.output == "text":
            result = text_result(self.name, outcome, limit)
        else:
            result = await content_result(self.name, outcome, limit, Path(ctx.workspace), images_ok=ctx.images_ok)
        refused = refusal_note(sandbox, not result.ok, result.text)
        if refused:
            result.text += "\n" + refused
        return result


def program_folders(program: str) -> list[str]:
    """What running ``program`` reads besides the system (SANDBOX-2: bubblewrap shows a
    command only what it is given): the folder it lies in and, for a Python virtual
    environment's interpreter, the whole environment (its ``pyvenv.cfg`` and packages)."""
    if not os.path.isabs(program):
        return []
    folder = os.path.dirname(program)
    found = [folder]
    venv = os.path.dirname(folder)
    if os.path.isfile(os.path.join(venv, "pyvenv.cfg")):
        found.append(venv)
    return found


# Data folders already made by this process: made once, at the first run (EX-3). If a
# folder is removed later, the tool creates it when missing, as the contract asks.
_made_folders: set[str] = set()


def _ensure_folder(folder: str, workspace: Path) -> None:
    if folder in _made_folders:
        return
    try:
        if Path(folder).is_relative_to(workspace):
            # TRUST-3: never through a symbolic link planted in .crystal/.
            ensure_folder_inside(workspace, Path(folder))
        else:
            os.makedirs(folder, exist_ok=True)
    except OSError:
        return  # not reported (EX-3)
    _made_folders.add(folder)


def check_data_dir(folder: str, workspace: Path) -> str | None:
    """SANDBOX-2: why the data folder ``folder`` must not be handed to the sandbox as
    writable, or None. The host resolves it once, here: a folder that is, or lies under,
    a symbolic link (a cloned repository's ``.crystal/data/tools/<set>`` pointing at
    ``../../prompts`` or at the Crystal Home) leads somewhere else, and the sandbox would
    follow the link and open that place to the tool. ``folder`` is spelled from resolved
    roots (:meth:`ExecTool.data_dirs`), so its resolved path must be itself."""
    real = os.path.realpath(folder)
    if real == folder:
        return None
    shown = folder
    if Path(folder).is_relative_to(workspace):
        shown = Path(folder).relative_to(workspace).as_posix()
    return (f"its data folder {shown} leads to {real} through a symbolic link, and Crystal opens only "
            "a real data folder to a tool; remove the link (the folder is made at the next call).")


def _flag_values(tool: str, prop: str, flag: str, value: Any) -> list[str]:
    """EX-7: the argv pieces for one mapped property."""
    if isinstance(value, bool):
        return [flag, "true" if value else "false"]
    if isinstance(value, (int, float)):
        return [flag, json.dumps(value)]
    if isinstance(value, str):
        return [flag, value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        out: list[str] = []
        for v in value:
            out += [flag, v]
        return out
    kind = ("null" if value is None else "an object" if isinstance(value, dict)
            else "an array that is not all strings" if isinstance(value, list) else type(value).__name__)
    raise ToolError(
        f"Argument '{prop}' of {tool} is {kind}; it is passed as the command-line flag {flag}, "
        "which takes only a string, a number, a boolean or an array of strings."
    )
