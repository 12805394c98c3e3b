"""The async paths are the only implementation of building a catalog
and discovering external tools (no sync twins: ``tools_now``, ``Session.tools()``, sync
``discover_*``); code without a running loop uses the one runner,
:func:`crystal_kernel.core.runner.run_to_completion`."""

from __future__ import annotations

import asyncio
import inspect
import threading

import pytest

import crystal_kernel.mcp as mcp
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.core.tool_types import ToolSource
from crystal_kernel.host import tool_sources
from crystal_kernel.host.session import Session
from crystal_kernel.mcp.manager import McpManager


def test_the_sync_twins_are_gone():
    assert not hasattr(Session, "tools")
    assert not hasattr(tool_sources.SessionTools, "tools_now") and not hasattr(ToolSource, "tools_now")
    assert not hasattr(McpManager, "tools_for")
    assert not hasattr(mcp, "discover_mcp_tools") and not hasattr(mcp, "discover_mcp_tools_async")
    assert inspect.iscoroutinefunction(tool_sources.discover_external_tools)
    assert not hasattr(tool_sources, "discover_external_tools_async")


def test_the_catalog_is_built_only_by_prepare_tools(workspace):
    """Before ``prepare_tools`` there is no catalog to read (nothing builds one behind
    the caller's back, blocking its loop while MCP servers start)."""
    from crystal_kernel.core.config import load_config
    from crystal_kernel.testing.scripted import ScriptedProvider

    session = Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([]), person_present=False)
    with pytest.raises(RuntimeError, match="prepare_tools"):
        session.tool("read")
    built = run_to_completion(session.prepare_tools())
    assert session.tool("read") is not None and session.catalog is built
    run_to_completion(session.close())


def test_the_runner_runs_without_a_loop():
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert run_to_completion(answer()) == 42


async def test_the_runner_runs_inside_a_running_loop_on_another_thread():
    """Sync code that a loop is executing (a kernel's callback) still gets its answer,
    on a loop of its own, and the caller's exceptions come back as raised."""
    caller = threading.get_ident()

    async def where() -> int:
        return threading.get_ident()

    async def fails() -> None:
        raise ValueError("bad input")

    assert run_to_completion(where()) != caller
    with pytest.raises(ValueError, match="bad input"):
        run_to_completion(fails())
