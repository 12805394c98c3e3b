"""``crystal prompts export work`` on a workspace with a prompt set, a Home override, a
workspace override and three attachments, run as a real CLI process and checked
verbatim against tests/prompts/data/export_work.expected (SPEC §11, PS-6, PA-7)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).with_name("data")


def _setup(home: Path, workspace: Path, mkset, mkatt) -> None:
    mkset("team", {"name": "Team", "enabled": True}, work_md="SET WORK (hidden by overrides)\n",
          plan_md="Set plan\n")
    (home / "prompts").mkdir()
    (home / "prompts" / "work.md").write_text("HOME WORK (hidden by the workspace override)\n")
    (home / "CRYSTAL.md").write_text("Prefer small commits.\n")
    ws_prompts = workspace / ".crystal" / "prompts"
    ws_prompts.mkdir(parents=True)
    (ws_prompts / "work.md").write_text(
        "Workspace work prompt for {{product_name}} in {{workspace}} ({{mode}} mode, approval {{approval}}).\n"
        "Model: {{model}} via {{provider}}. Unknown tokens stay: {{not_a_slot}}.\n"
        "\n"
        "{{instructions_section}}\n")
    (workspace / "AGENTS.md").write_text("Run pytest before committing.\n")
    mkatt("alpha", {"name": "Alpha", "enabled": True, "order": 0}, work_md="Alpha attachment in {{mode}} mode.\n")
    mkatt("beta", {"enabled": True, "order": 0}, work_md="HOME BETA (shadowed by the workspace copy)\n")
    mkatt("beta", {"enabled": True, "order": 1}, where="workspace", work_md="Beta from the workspace.\n")
    mkatt("gamma", {"enabled": False}, work_txt="Gamma, forced by the flag.")


def test_export_work_verbatim(home, workspace, mkset, mkatt, snap):
    _setup(home, workspace, mkset, mkatt)
    before = snap(home), snap(workspace)
    result = subprocess.run(
        ["crystal", "prompts", "export", "work", "--home", str(home), "--workspace", str(workspace),
         "--provider", "openai", "--model", "gpt-4.1", "--approval", "edit",
         "--prompt-attachment", "gamma", "--disable-tool", "bash", "--disable-tool", "bash_start"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    expected = (DATA / "export_work.expected").read_text().replace("@WS@", str(workspace)).replace("@HOME@", str(home))
    assert result.stdout == expected
    # TRUST-5: the repository's work.md is used, never silently.
    assert result.stderr == (f"note: The workspace's {workspace}/.crystal/prompts/work.md replaces Crystal's "
                             "built-in 'work' prompt (project instructions, read without trust like AGENTS.md; "
                             "docs/security.md).\n")
    assert (snap(home), snap(workspace)) == before  # export writes nothing


def test_export_plan_uses_the_set_and_refuses_bad_input(home, workspace, mkset, mkatt):
    _setup(home, workspace, mkset, mkatt)
    base = [sys.executable, "-m", "crystal_kernel.cli", "prompts", "export"]
    loc = ["--home", str(home), "--workspace", str(workspace)]
    plan = subprocess.run(base + ["plan", *loc, "--prompt-attachments", "off"], capture_output=True, text=True, timeout=60)
    assert plan.stdout == "Set plan\n"
    review_user = subprocess.run(base + ["review.user", *loc], capture_output=True, text=True, timeout=60)
    assert "{{tool_name}}" in review_user.stdout  # per-call slots stay as tokens in an export
    for bad in (["nope", *loc], ["work", *loc, "--disable-tool", "teleport"],
                ["work", *loc, "--prompt-set", "ghost"], ["work", "--workspace", str(workspace / "missing")]):
        result = subprocess.run(base + bad, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, (bad, result.stderr)
        assert result.stdout == ""
