"""Catalogs (MODE-1, MODE-2, MODE-3, MODE-7): Plan and Work order, --disable-tool
(background and image tools included), unknown names, reserved names."""

from __future__ import annotations

from pathlib import Path

import pytest

from crystal_kernel.core.config import Config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.host.session import ProcessFlags, Session
from crystal_kernel.testing.scripted import ScriptedProvider
from crystal_kernel.tools.base import Risk, Tool, ToolInput
from crystal_kernel.tools.catalog import (
    BUILTIN_TOOLS,
    RESERVED_NAMES,
    CatalogOptions,
    build_catalog,
    builtin_names,
    check_disabled,
)

PLAN = ["read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill",
        "view_image", "describe_image"]
WORK = ["read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill",
        "edit", "write", "bash", "bash_start", "bash_status", "bash_logs", "bash_stop",
        "notebook_edit", "notebook_run", "view_image", "describe_image"]


def names(tools) -> list[str]:
    return [t.name for t in tools]


def make_session(workspace: Path, home: Path, **kwargs) -> Session:
    return Session(workspace=workspace, config=Config(home=home), provider=ScriptedProvider(), **kwargs)


def test_plan_order_mode_1():
    opts = CatalogOptions(mode="plan", skills_available=True)
    assert builtin_names(opts) == PLAN
    assert names(build_catalog(opts)) == PLAN


def test_work_order_mode_2():
    opts = CatalogOptions(mode="work", skills_available=True)
    assert builtin_names(opts) == WORK
    assert names(build_catalog(opts)) == WORK


def test_plan_never_has_edit_write_bash_mode_3():
    for tool in build_catalog(CatalogOptions(mode="plan", skills_available=True)):
        assert tool.name not in ("edit", "write", "bash") and tool.risk == Risk.READ, tool.name


def test_question_only_with_a_person_and_skill_only_with_skills():
    opts = CatalogOptions(mode="work", person_present=False, skills_available=False)
    got = builtin_names(opts)
    assert "question" not in got and "skill" not in got


def test_session_catalogs(workspace: Path, home: Path):
    session = make_session(workspace, home)
    assert names(run_to_completion(session.prepare_tools())) == [n for n in WORK if n != "skill"]
    session.set_mode("plan")
    assert names(run_to_completion(session.prepare_tools())) == [n for n in PLAN if n != "skill"]
    cli = make_session(workspace, home, person_present=False)
    assert "question" not in names(run_to_completion(cli.prepare_tools()))


@pytest.mark.parametrize("disabled", [
    ["bash"], ["bash_start", "bash_status", "bash_logs", "bash_stop"], ["view_image", "describe_image"],
    ["skill"], ["read", "search", "question"], ["edit", "write"],
])
def test_disable_tool_mode_7(workspace: Path, home: Path, disabled: list[str]):
    (home / "skills" / "s").mkdir(parents=True)
    (home / "skills" / "s" / "SKILL.md").write_text("---\ndescription: d\n---\nbody")
    for mode, order in (("work", WORK), ("plan", PLAN)):
        assert builtin_names(CatalogOptions(mode=mode, disabled=disabled, skills_available=True)) == [
            n for n in order if n not in disabled
        ]
    session = make_session(workspace, home, flags=ProcessFlags(disable_tool=list(disabled)))
    assert not set(disabled) & set(names(run_to_completion(session.prepare_tools())))
    # The system text names the omitted tools and tells the model not to call them.
    text = session.system_text()
    for name in disabled:
        assert name in text


def test_disable_tool_repeatable_and_deduplicated():
    assert check_disabled(["bash", "grep", "bash"]) == ["bash", "grep"]


def test_unknown_disable_tool_refused(workspace: Path, home: Path):
    with pytest.raises(UserError, match="unknown built-in tool 'nope'"):
        check_disabled(["nope"])
    with pytest.raises(UserError, match="unknown built-in tool 'Bash'"):
        make_session(workspace, home, flags=ProcessFlags(disable_tool=["Bash"]))


class _Input(ToolInput):
    pass


def external(name: str) -> Tool:
    cls = type("External", (Tool,), {"name": name, "Input": _Input, "external": True})
    return cls()


def test_reserved_names_refused_for_external_tools():
    extras = [external("read"), external("bash_start"), external("describe_image"), external("python"),
              external("thumb"), external("thumb")]
    got = names(build_catalog(CatalogOptions(mode="work"), external=extras))
    builtins = [n for n in WORK if n != "skill"]
    assert got == builtins + ["thumb"]


def test_disabled_names_stay_reserved():
    opts = CatalogOptions(mode="work", disabled=["grep"])
    got = names(build_catalog(opts, external=[external("grep")]))
    assert "grep" not in got
    assert "grep" in RESERVED_NAMES and set(BUILTIN_TOOLS) == RESERVED_NAMES


def test_every_tool_of_this_issue_loads():
    got = names(build_catalog(CatalogOptions(mode="work", skills_available=True)))
    for name in PLAN + ["edit", "write", "bash"]:
        assert name in got
