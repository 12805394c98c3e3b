"""Hypothesis fuzzing of what models and people hand the host: tool arguments (every
built-in tool and an exec tool), tools.json, prompt.json, config.json and replay
cassettes. Never a crash: a tool gives a result or a ToolError the model can read; a
bad file is a clear one-line error or a note; a corrupt file is left byte for byte.

Commands are never executed from fuzzed text: for bash and bash_start the arguments are
parsed and classified only (running random shell text is not a test, it is a hazard).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crystal_kernel.core.config import Config, load_config
from crystal_kernel.core.errors import ProviderError, ToolError, UserError
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.core.messages import Message, TextPart
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.host.session import Session
from crystal_kernel.host.tool_sources import discover_external_tools
from crystal_kernel.providers.base import ModelRequest
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import ToolContext, ToolResult
from crystal_kernel.tools.catalog import load_builtin

FAST = settings(max_examples=int(os.environ.get("CRYSTAL_FUZZ_EXAMPLES", "30")), deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
BUILTINS = ["read", "write", "edit", "list", "tree", "glob", "grep", "search", "todowrite", "todoread",
            "view_image", "describe_image", "skill", "bash", "bash_start", "bash_status", "bash_logs", "bash_stop",
            "question"]
PARSE_ONLY = {"bash", "bash_start", "question"}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=40))
paths = st.sampled_from(["a.txt", "sub/b.txt", "../x", "/etc/passwd", "", " ", "~", ".", "sub", "a.txt\x00",
                         "nope/", "ä.txt", "*", "**/*", "x" * 300])
json_values = st.recursive(scalars | paths, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def shaped(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that follow ``schema`` (types, enums, required keys), so that fuzzing gets
    past validation into the tool's own code; texts lean on awkward paths and patterns."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "anyOf" in schema:
        return st.one_of([shaped(s, depth) for s in schema["anyOf"]])
    kind = schema.get("type")
    if kind == "string":
        return paths | st.text(max_size=30) | st.sampled_from(["alpha", "a.txt:1", "[", "(?P<", "\\", "*.txt", "{a,b}"])
    if kind == "integer":
        return st.integers(-3, 10**7)
    if kind == "number":
        return st.floats(-1e6, 1e9, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(shaped(schema.get("items", {}), depth + 1), max_size=3)
    if kind == "object" and depth < 3:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries({k: shaped(v, depth + 1) for k, v in props.items() if k in required},
                                     optional={k: shaped(v, depth + 1) for k, v in props.items() if k not in required})
    return json_values


def arguments_for(tool_name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Mostly schema-shaped arguments, sometimes anything at all (wrong types, extra keys)."""
    schema = load_builtin(tool_name).input_schema()
    props = list(schema.get("properties", {}))
    keys = st.sampled_from(props) | st.text(max_size=6) if props else st.text(max_size=8)
    anything = st.dictionaries(keys, json_values | paths, max_size=len(props) + 2)
    return st.one_of(shaped(schema), shaped(schema), shaped(schema), anything)


def make_world(root: Path) -> tuple[Session, ToolContext]:
    ws = root / "ws"
    shutil.rmtree(ws, ignore_errors=True)
    (ws / "sub").mkdir(parents=True)
    (ws / "a.txt").write_text("alpha\nbeta\n")
    (ws / "sub" / "b.txt").write_text("gamma\n")
    home = root / "home"
    home.mkdir(exist_ok=True)
    session = Session(workspace=ws, config=Config(home=home, approval="full"), provider=ScriptedProvider(),
                      person_present=False)
    return session, session.tool_context(NoPerson(), call_id="c1", images_ok=True)


async def run_once(tool_name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
    tool = load_builtin(tool_name)
    try:
        args = tool.parse(arguments)
        tool.classify(args, ctx)
        if tool_name in PARSE_ONLY:
            return ToolResult(ok=True, text="parsed")
        return await asyncio.wait_for(tool.run(args, ctx), 30)
    except ToolError as exc:
        return ToolResult.fail(str(exc))


def test_fuzzed_arguments_never_crash_a_builtin_tool(tmp_path):
    session, ctx = make_world(tmp_path)
    for name in BUILTINS:
        fuzz_one_tool(name, ctx)
    asyncio.run(session.close())


def fuzz_one_tool(name: str, ctx: ToolContext) -> None:
    """Hypothesis over one tool's arguments (a function of its own: ``@given`` refuses a
    default argument, the usual way to bind a loop variable)."""
    @FAST
    @given(arguments=arguments_for(name))
    def check(arguments: dict[str, Any]) -> None:
        result = asyncio.run(run_once(name, arguments, ctx))
        assert isinstance(result, ToolResult)
        if not result.ok:
            assert result.text.strip(), f"{name}: a failure without a message"
    check()


EXEC_SCRIPT = """import json, sys
data = sys.stdin.read()
print(json.dumps({"text": "argv=" + json.dumps(sys.argv[1:]) + " stdin=" + data}))
"""


def test_fuzzed_arguments_never_crash_an_exec_tool(tmp_path):
    session, ctx = make_world(tmp_path)
    folder = tmp_path / "home" / "tools" / "echoes"
    folder.mkdir(parents=True)
    (folder / "echo.py").write_text(EXEC_SCRIPT)
    (folder / "tools.json").write_text(json.dumps({"command": [sys.executable, "echo.py"], "tools": [
        {"name": "echo_args", "description": "Echoes.", "argv": {"path": "--path", "size": "--size", "tags": "--tag"},
         "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "size": {"type": "integer"},
                                                          "tags": {"type": "array", "items": {"type": "string"}}}}}]}))
    tools, notes = run_to_completion(discover_external_tools(tmp_path / "home", session.workspace, context=session))
    tool = {t.name: t for t in tools}["echo_args"]

    @settings(max_examples=40, deadline=None, derandomize=True)
    @given(arguments=st.dictionaries(st.sampled_from(["path", "size", "tags"]) | st.text(max_size=5),
                                     json_values, max_size=4))
    def check(arguments: dict[str, Any]) -> None:
        async def go() -> ToolResult:
            try:
                return await tool.run(tool.parse(arguments), ctx)
            except ToolError as exc:
                return ToolResult.fail(str(exc))
        result = asyncio.run(go())
        assert result.ok or result.text.strip()
        if result.ok:
            assert "argv=" in result.text
    check()


# ----- files people write by hand -------------------------------------------------------------------
file_texts = st.one_of(
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    json_values.map(json.dumps),
    st.dictionaries(st.sampled_from(["command", "tools", "name", "enabled", "order", "description", "version",
                                     "interactions", "provider", "approval", "forbidden", "bashTimeoutSeconds",
                                     "toolOutputLimit", "skills", "model", "requestTimeoutSeconds"]),
                    json_values, max_size=5).map(json.dumps),
)


def written(path: Path, text: str) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path.read_bytes()


@FAST
@given(text=file_texts)
def test_fuzzed_tools_json_is_a_note_never_a_crash(tmp_path, text):
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    manifest = home / "tools" / "fuzzed" / "tools.json"
    before = written(manifest, text)
    tools, notes = run_to_completion(discover_external_tools(home, ws))
    assert all(isinstance(n, str) and n.strip() for n in notes)
    assert manifest.read_bytes() == before


@FAST
@given(text=file_texts, attachment=file_texts)
def test_fuzzed_prompt_json_is_a_note_never_a_crash(tmp_path, text, attachment):
    from crystal_kernel.prompts.attachments import discover_attachments
    from crystal_kernel.prompts.commands import apply_attachment_action
    from crystal_kernel.prompts.promptsets import discover_sets, enable_set

    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    set_manifest = home / "promptsets" / "fuzzed" / "prompt.json"
    attach_manifest = ws / ".crystal" / "prompt-attachments" / "fuzzy" / "prompt.json"
    before = {set_manifest: written(set_manifest, text), attach_manifest: written(attach_manifest, attachment)}
    (set_manifest.parent / "work.md").write_text("fuzzed work text")
    notes: list[str] = []
    discover_sets(home, notes)
    discover_attachments(home, ws, notes)
    assert all(isinstance(n, str) and n.strip() for n in notes)
    for action in (lambda: enable_set(home, "fuzzed"),
                   lambda: apply_attachment_action(discover_attachments(home, ws, []), "enable", "fuzzy")):
        try:
            action()
        except UserError as exc:
            assert str(exc).strip() and "\n" not in str(exc)
    # A session composes its system text around whatever is there.
    session = Session(workspace=ws, config=Config(home=home), provider=ScriptedProvider(), person_present=False)
    assert session.system_text().strip()
    for path, data in before.items():
        if discover_problem(path):
            assert path.read_bytes() == data, f"corrupt {path.name} was rewritten"


def discover_problem(path: Path) -> bool:
    from crystal_kernel.prompts.manifest import read_manifest

    return read_manifest(path.parent)[0] is None


@FAST
@given(text=file_texts)
def test_fuzzed_config_json_is_one_line_never_a_crash(tmp_path, text):
    home = tmp_path / "home"
    before = written(home / "config.json", text)
    try:
        config = load_config(home=home, environ={})
        assert config.home == home
    except UserError as exc:
        assert str(exc).strip() and "\n" not in str(exc)
    assert (home / "config.json").read_bytes() == before


@FAST
@given(text=file_texts)
def test_fuzzed_cassette_is_a_provider_error_never_a_crash(tmp_path, text):
    from crystal_kernel.providers.registry import make_provider

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir(exist_ok=True)
    cassette = ws / ".crystal" / "cassettes" / "default.json"
    before = written(cassette, text)
    provider = make_provider(Config(home=home, provider="replay"), workspace=ws)
    request = ModelRequest(model="replay", system="s", messages=[Message(role="user", parts=[TextPart(text="hi")])],
                           tools=[], purpose="turn")

    async def go() -> None:
        try:
            async for _ in provider.stream(request):
                pass
        except (ProviderError, UserError) as exc:
            assert str(exc).strip()

    asyncio.run(go())
    assert cassette.read_bytes() == before
