"""The ``tools.json`` manifest of an exec tool set (SPEC §11, EX-4, EX-5).

```json
{"command": ["python3", "mytool.py"],
 "tools": [{"name": "thumb", "description": "…", "inputSchema": {"type": "object"},
            "command": ["thumb"], "argv": {"path": "--path"}, "stdin": true,
            "output": "content", "timeoutSeconds": 30, "catalogs": ["plan", "work"]}]}
```

The set is read in two steps so that one bad tool does not hide the others: the set
itself (:func:`parse_set`) and then each tool (:func:`parse_tool`). Every problem is one
English sentence; the caller adds the file name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from crystal_kernel.tools.schema_check import SchemaProblem, check_schema

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
DEFAULT_TIMEOUT_SECONDS = 60.0


class ManifestError(Exception):
    """A manifest or one of its tools cannot be used; the message is one sentence."""


class ExecToolManifest(BaseModel):
    """One tool entry. Unknown fields are kept (a newer host may read them)."""

    # Built on first use: a session without exec sets never validates a manifest, and
    # building the validators cost every start ~2 ms (docs/benchmarks.md, start).
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}},
                                         alias="inputSchema")
    command: list[str] | None = None
    argv: dict[str, str] = Field(default_factory=dict)
    stdin: bool = True
    output: Literal["content", "text"] = "content"
    timeout_seconds: int | float | Literal["unlimited"] = Field(DEFAULT_TIMEOUT_SECONDS, alias="timeoutSeconds")
    catalogs: list[Literal["plan", "work"]] = Field(default_factory=lambda: list[Literal["plan", "work"]](["work"]))
    input_kind: Literal["json", "text"] = Field("json", alias="inputKind")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not NAME_PATTERN.match(value):
            raise ValueError("must match ^[a-z][a-z0-9_]{0,63}$ (lowercase letter, then letters, digits, _)")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not part for part in value):
            raise ValueError("must not contain empty strings")
        return value

    @field_validator("argv")
    @classmethod
    def _argv(cls, value: dict[str, str]) -> dict[str, str]:
        for prop, flag in value.items():
            if not flag:
                raise ValueError(f"the flag for '{prop}' is empty")
        return value

    @field_validator("timeout_seconds", mode="before")
    @classmethod
    def _timeout(cls, value: Any) -> Any:
        if value == "unlimited":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError('must be a positive number of seconds or "unlimited"')
        return value

    @field_validator("input_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type", "object") != "object":
            raise ValueError('must describe an object ("type": "object")')
        try:
            check_schema(value, "inputSchema")
        except SchemaProblem as exc:
            raise ValueError(f"is not a valid JSON schema ({exc})") from None
        return {"type": "object", **value}

    @model_validator(mode="after")
    def _catalogs(self) -> ExecToolManifest:
        # Keep manifest order, drop duplicates.
        self.catalogs = list(dict.fromkeys(self.catalogs))
        return self

    @property
    def timeout(self) -> float | None:
        """Seconds, or None for "unlimited"."""
        return None if self.timeout_seconds == "unlimited" else float(self.timeout_seconds)


class SetManifest(BaseModel):
    """The set: its shared command and the raw tool entries (parsed one by one)."""

    model_config = ConfigDict(extra="allow", defer_build=True)

    command: list[str] = Field(default_factory=list)
    tools: list[Any]

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if any(not part for part in value):
            raise ValueError("must not contain empty strings")
        return value


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "manifest"
        msg = err["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {msg}")
    return "; ".join(problems)


def read_set(path: Path) -> SetManifest:
    """Read and check a tools.json; raise ManifestError describing the problem."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ManifestError(f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ManifestError("is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"is not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ManifestError("must hold a JSON object")
    try:
        manifest = SetManifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(_describe(exc)) from None
    check_relative_executable(manifest.command, what="command")
    return manifest


def parse_tool(raw: Any, set_command: list[str], index: int) -> ExecToolManifest:
    """Check one tool entry; raise ManifestError naming it."""
    label = f"tools[{index}]"
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        label = f"tool '{raw['name']}'"
    if not isinstance(raw, dict):
        raise ManifestError(f"{label} must be an object")
    try:
        tool = ExecToolManifest.model_validate(raw)
    except ValidationError as exc:
        raise ManifestError(f"{label}: {_describe(exc)}") from None
    if not set_command and not tool.command:
        raise ManifestError(f"{label} has no command and the set has no command either")
    if not set_command:
        check_relative_executable(tool.command or [], what=f"{label}: command")
    return tool


def has_separator(part: str) -> bool:
    return "/" in part or "\\" in part


def check_relative_executable(command: list[str], *, what: str) -> None:
    """EX-4, checked statically: a relative executable with a separator must not climb
    out of the set folder (``../x`` is refused)."""
    if not command:
        return
    exe = command[0]
    if not has_separator(exe) or PurePosixPath(exe).is_absolute() or PureWindowsPath(exe).is_absolute():
        return
    parts = exe.replace("\\", "/").split("/")
    depth = 0
    for part in parts:
        if part == "..":
            depth -= 1
        elif part not in ("", "."):
            depth += 1
        if depth < 0:
            raise ManifestError(f"{what}: the executable '{exe}' leaves the set folder")
