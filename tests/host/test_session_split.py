"""The session is split into its state (host/state.py, saved through
host/document.py), its file (host/session_file.py) and its runtime (host/runtime.py),
and ``host/session.py`` puts them together in under 300 lines. The helpers a session
imports (review, side requests, tool sources) take the narrow SessionView protocol
(host/view.py), so no import cycle is left to hide in a function-level import."""

from __future__ import annotations

import ast
from pathlib import Path

from crystal_kernel.core.config import load_config
from crystal_kernel.host.session import Session
from crystal_kernel.host.state import SessionState
from crystal_kernel.host.tool_sources import SessionTools
from crystal_kernel.host.view import SessionView
from crystal_kernel.testing.scripted import ScriptedProvider

HOST = Path(__file__).resolve().parents[2] / "crystal_kernel" / "host"
# What host/session.py imports from the host and what they import in turn.
SESSION_PARTS = ["state.py", "document.py", "session_file.py", "runtime.py", "view.py",
                 "review.py", "sidecall.py", "tool_sources.py", "recorded_person.py"]


def _imports(tree: ast.AST) -> list[tuple[str, bool]]:
    """(module, at function level) of every ``from X import`` / ``import X``."""
    found: list[tuple[str, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.ImportFrom) and child.module:
                found.append((child.module, in_function))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            walk(child, inside)

    walk(tree, False)
    return found


def test_session_module_is_small():
    assert len((HOST / "session.py").read_text(encoding="utf-8").splitlines()) < 300


def test_the_parts_never_import_the_session():
    """Not even for type checking: they take SessionView (or the state), so session.py
    imports them at module level and no cycle runs through it."""
    for name in SESSION_PARTS:
        modules = [m for m, _ in _imports(ast.parse((HOST / name).read_text(encoding="utf-8")))]
        assert "crystal_kernel.host.session" not in modules, name


def test_no_function_level_import_in_the_session_or_its_parts():
    for name in ["session.py", *SESSION_PARTS[:-1]]:
        inner = [m for m, in_function in _imports(ast.parse((HOST / name).read_text(encoding="utf-8")))
                 if in_function and m.startswith("crystal_kernel.host")]
        assert inner == [], f"{name} imports {inner} inside a function"


def _session(workspace: Path, source: SessionTools | None = None, provider: ScriptedProvider | None = None) -> Session:
    return Session(workspace=workspace, config=load_config(), provider=provider or ScriptedProvider([]),
                   person_present=False, tool_source=source)


def test_a_session_is_its_state_and_satisfies_the_view(workspace):
    session = _session(workspace)
    assert isinstance(session, SessionState)
    view: SessionView = session  # mypy checks this assignment too
    assert view.workspace == session.workspace and view.provider is session.runtime.provider


async def test_the_runtime_closes_what_was_opened_once_clients_last(workspace):
    """Jobs, the tool source (and so its MCP servers) and the clients close when the
    session closes, the provider after the source; a second close opens nothing again."""
    log: list[str] = []

    class Tracked(SessionTools):
        async def __aexit__(self, *exc_info: object) -> None:
            log.append("source")
            await super().__aexit__(*exc_info)

    class Provider(ScriptedProvider):
        async def aclose(self) -> None:
            log.append("provider")

    session = _session(workspace, Tracked(), Provider([]))
    await session.prepare_tools()
    job = session.jobs.start("sleep 30")
    await session.close()
    assert session.jobs.status(job.id).state != "running"
    assert log == ["source", "provider"]
    await session.close()
    assert log.count("source") == 1


async def test_state_round_trips_through_the_document(workspace):
    """The store's view of a session: the document of its state, unknown keys kept."""
    session = _session(workspace)
    session.topic, session.turns = "a topic", 3
    doc = session.to_document()
    doc["someoneElses"] = {"kept": True}
    other = _session(workspace)
    other.load_document(doc)
    assert (other.id, other.topic, other.turns) == (session.id, "a topic", 3)
    assert other.to_document()["someoneElses"] == {"kept": True}
