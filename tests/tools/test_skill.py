"""skill: discovery in home and workspace, front matter, the {{skills}} text, the body."""

from __future__ import annotations

from pathlib import Path

from crystal_kernel.core.runner import run_to_completion
from crystal_kernel.prompts.context import session_skills_text
from crystal_kernel.prompts.skills import discover_skills, skills_text, split_front_matter
from crystal_kernel.tools.catalog import CatalogOptions, builtin_names
from tests.tools.conftest import call


def add_skill(root: Path, folder: str, front: str, body: str = "Do the thing.\n") -> Path:
    d = root / folder
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}")
    return d


def test_front_matter_subset():
    fields, body = split_front_matter(
        "---\nname: pdf\ndescription: 'Fill PDF forms: it''s easy'\nlong: >\n  one\n  two\n# comment\n---\nBody\n"
    )
    assert fields == {"name": "pdf", "description": "Fill PDF forms: it's easy", "long": "one two"}
    assert body == "Body"
    assert split_front_matter("no front matter") == ({}, "no front matter")
    assert split_front_matter("---\nname: x\nunterminated") == ({}, "---\nname: x\nunterminated")


def test_discovery_home_and_workspace(home: Path, workspace: Path):
    add_skill(home / "skills", "pdf", "name: pdf\ndescription: Work with PDF files")
    add_skill(home / "skills", "shared", "name: shared\ndescription: home version")
    add_skill(workspace / ".crystal" / "skills", "shared", "name: shared\ndescription: workspace version")
    add_skill(workspace / ".crystal" / "skills", "nodesc", "name: nodesc")
    (home / "skills" / "empty").mkdir()
    skills = discover_skills(home, workspace)
    assert [(s.name, s.description) for s in skills] == [
        ("pdf", "Work with PDF files"), ("shared", "workspace version"),
    ]
    assert skills_text(skills) == (
        "Skills you can load with the skill tool when a task matches their description:\n"
        "- pdf: Work with PDF files\n- shared: workspace version"
    )
    assert skills_text([]) == ""


def test_skills_text_from_session(session, home: Path):
    """The {{skills}} slot of a session: its skills found in its Home and workspace."""
    assert session_skills_text(session, []) == ""
    add_skill(home / "skills", "pdf", "description: Work with PDF files")
    assert "- pdf: Work with PDF files" in session_skills_text(session, [])
    assert session_skills_text(session, ["skill"]) == "", "the skill tool disabled: no slot"


async def test_tool_returns_body(ctx, home: Path):
    folder = add_skill(home / "skills", "pdf", "name: pdf\ndescription: PDFs", body="Step 1: run fill.py\n")
    result = await call("skill", ctx, name="pdf")
    assert result.ok
    assert result.text == f"Skill 'pdf' (folder {folder}; files it mentions are relative to it)\n\nStep 1: run fill.py"


async def test_unknown_skill(ctx, home: Path):
    add_skill(home / "skills", "pdf", "description: PDFs")
    result = await call("skill", ctx, name="nope")
    assert not result.ok and result.text == "There is no skill named 'nope'. Available skills: pdf."


async def test_body_truncated(ctx, home: Path):
    add_skill(home / "skills", "big", "description: big", body="x" * 5000)
    ctx.config.tool_output_limit = 1000
    assert "characters cut" in (await call("skill", ctx, name="big")).text


def test_registered_only_with_skills(session, home: Path):
    assert "skill" not in [t.name for t in run_to_completion(session.prepare_tools())]
    add_skill(home / "skills", "pdf", "description: PDFs")
    session.refresh_system()
    assert "skill" in [t.name for t in run_to_completion(session.prepare_tools())]
    session.config.skills = False
    session.refresh_system()
    assert "skill" not in [t.name for t in run_to_completion(session.prepare_tools())]
    assert "skill" in builtin_names(CatalogOptions(skills_available=True))
