"""TRUST-4 attack: project text the host reads itself (AGENTS.md, CRYSTAL.md, prompt
overrides, prompt attachments, skills) goes to the model server with no tool call and
no approval. A cloned repository whose `AGENTS.md` is a symbolic link to
`/proc/self/environ` sent the person's whole environment (a `GITHUB_TOKEN`) to the model
in the system text; one whose `.crystal/prompts/work.md` links to a file elsewhere sent
that file. Such a file is not read (one line says why); a link that stays inside the
workspace still is.

Each case runs a real `crystal run` against the loopback model server and searches
every request it received.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
TOKEN = "ghp_" + "PersonsOwnToken4242"
SECRET = "SECRET-FILE-CONTENT-7731"


def run_crystal(workspace: Path, server: LLMServer) -> subprocess.CompletedProcess:
    env = {**os.environ, "GITHUB_TOKEN": TOKEN, "CLONE_TEST_KEY": "sk-clone-test-key"}
    return subprocess.run([CRYSTAL, "run", "--provider", "openai", "--base-url", server.base_url,
                           "--api-key-env", "CLONE_TEST_KEY", "hello"],
                          cwd=workspace, env=env, capture_output=True, text=True, timeout=120)


def plant(workspace: Path, where: str, target: Path | str) -> None:
    link = workspace / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    if where.startswith(".crystal/prompt-attachments/"):
        (link.parent / "prompt.json").write_text(json.dumps({"enabled": True}))


@pytest.mark.parametrize("where", ["AGENTS.md", "CRYSTAL.md", ".crystal/prompts/work.md",
                                   ".crystal/prompt-attachments/notes/work.md", ".crystal/skills/s/SKILL.md"])
@pytest.mark.parametrize("target", ["environ", "file outside", "credential inside"])
def test_a_linked_project_file_sends_no_secret_to_the_model(workspace, tmp_path, where, target):
    if target == "environ":
        destination: Path | str = "/proc/self/environ"
    elif target == "file outside":
        destination = tmp_path / "elsewhere" / "notes.md"
        destination.parent.mkdir()
        destination.write_text(f"---\nname: s\ndescription: {SECRET}\n---\n{SECRET}\n")
    else:
        destination = workspace / ".env"
        destination.write_text(f"---\nname: s\ndescription: {SECRET}\n---\nTOKEN={SECRET}\n")
    plant(workspace, where, destination)
    with LLMServer([{"text": "ok"}]) as server:
        done = run_crystal(workspace, server)
        assert done.returncode == 0, done.stderr
        sent = json.dumps(server.requests)
    assert server.bodies("chat"), "the turn reached the model server"
    assert TOKEN not in sent and SECRET not in sent, f"{where} -> {destination} reached the model"


def test_a_link_inside_the_workspace_is_still_read(workspace):
    """The check is where the file really is, not whether it is a link: a repository
    that links AGENTS.md to docs/agents.md keeps its instructions."""
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text("PROJECT-RULE: run make check before committing.\n")
    (workspace / "AGENTS.md").symlink_to("docs/agents.md")
    with LLMServer([{"text": "ok"}]) as server:
        done = run_crystal(workspace, server)
        assert done.returncode == 0, done.stderr
        system = server.bodies("chat")[0]["messages"][0]["content"]
    assert "PROJECT-RULE" in system


def test_the_prompt_override_says_why_it_was_skipped(workspace, tmp_path):
    """One line names the file and the reason (docs/troubleshooting.md)."""
    outside = tmp_path / "outside.md"
    outside.write_text(SECRET)
    plant(workspace, ".crystal/prompts/work.md", outside)
    with LLMServer([{"text": "ok"}]) as server:
        done = run_crystal(workspace, server)
    assert done.returncode == 0, done.stderr
    assert (f"Skipped the prompt file {workspace / '.crystal/prompts/work.md'}: it leads outside the workspace"
            in done.stdout + done.stderr), done.stdout + done.stderr
