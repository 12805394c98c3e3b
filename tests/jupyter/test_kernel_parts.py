"""@path mentions, completion, kernel flags, the notebook map and `crystal kernel
install`, on real files and a real Session."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crystal_kernel.core.config import load_config
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.messages import ImagePart, TextPart
from crystal_kernel.host.completion import attachment_names, complete, prompt_set_names
from crystal_kernel.host.mentions import attach_mentions, find_mentions
from crystal_kernel.host.session import Session
from crystal_kernel.jupyter.kernelspec import SAFE_LAUNCH
from crystal_kernel.jupyter.notebook_map import last_session, map_path, remember
from crystal_kernel.jupyter.options import parse, to_argv
from crystal_kernel.testing.scripted import ScriptedProvider


@pytest.fixture
def session(workspace):
    return Session(workspace=workspace, config=load_config(), provider=ScriptedProvider([]), notebook=True)


def test_mentions_attach_files_and_leave_other_at_words(session, workspace):
    (workspace / "a.py").write_text("print(1)\n")
    (workspace / "my file.txt").write_text("spaced")
    (workspace / "bin.dat").write_bytes(b"\x00\x01\x02")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    (workspace / "pic.png").write_bytes(png)
    text = 'See @a.py. and @"my file.txt", mail me at x@y.org, @decorator, @bin.dat, @pic.png'
    assert find_mentions(text)[:2] == ["a.py.", "my file.txt"]
    prompt, notes = attach_mentions(session, text)
    assert isinstance(prompt, list) and prompt[0] == TextPart(text=text)
    assert prompt[1].text == '<file path="a.py">\nprint(1)\n\n</file>'
    assert prompt[2].text == '<file path="my file.txt">\nspaced\n</file>'
    assert isinstance(prompt[4], ImagePart) and prompt[4].raw() == png
    assert "@bin.dat is not a text file; it was not attached." in notes
    assert attach_mentions(session, "no mentions here") == ("no mentions here", [])


def test_mentions_respect_access_rules(session, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("s")
    prompt, notes = attach_mentions(session, f"read @{outside}")
    assert prompt == f"read @{outside}"
    assert len(notes) == 1 and notes[0].startswith(f"@{outside} was not attached:")


def test_completion_of_arguments_and_hidden_files(workspace):
    (workspace / ".hidden").write_text("")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("")
    assert complete("/approval f", 11, workspace)["matches"] == ["full"]
    assert complete("@src/m", 6, workspace)["matches"] == ["@src/main.py"]
    assert complete("@", 1, workspace)["matches"] == ["@src/"]
    assert complete("@.h", 3, workspace)["matches"] == ["@.hidden"]
    assert complete("/logs ", 6, workspace, job_ids=lambda: ["j1"])["matches"] == ["j1", "--follow"]
    assert complete("/cd s", 5, workspace)["matches"] == ["src/"]
    assert complete("plain words", 5, workspace)["matches"] == []


def test_completion_of_prompt_set_and_attachment_names(workspace, tmp_path):
    """PS-7/PA-8 arguments complete from what is on disk: the sets of Home (and default),
    the attachments of Home and workspace; only in their argument's position."""
    home = tmp_path / "home"
    for folder in (home / "promptsets" / "terse", home / "prompt-attachments" / "house-style",
                   workspace / ".crystal" / "prompt-attachments" / "repo-notes"):
        folder.mkdir(parents=True)
        (folder / "prompt.json").write_text('{"enabled": false}')
        (folder / "work.md").write_text("Be brief.")
    sources = {"prompt_sets": lambda: prompt_set_names(home),
               "attachments": lambda: attachment_names(home, workspace)}
    assert complete("/promptset ", 11, workspace, **sources)["matches"] == ["default", "terse"]
    assert complete("/prompts t", 10, workspace, **sources)["matches"] == ["terse"]
    assert complete("/promptattach enable ", 21, workspace, **sources)["matches"] == ["house-style", "repo-notes"]
    assert complete("/promptattach up r", 18, workspace, **sources)["matches"] == ["repo-notes"]
    assert complete("/promptattach e", 15, workspace, **sources)["matches"] == ["enable"]
    assert complete("/promptset terse ", 17, workspace, **sources)["matches"] == []


def test_kernel_flags_from_argv_and_CRYSTAL_ARGS():
    options, rest = parse(["--prompt-set", "a", "--disable-tool", "bash", "-f", "conn.json"],
                          environ={"CRYSTAL_ARGS": "--disable-tool python --ask-timeout 30 --prompt-set b"})
    assert rest == ["-f", "conn.json"]
    assert options.namespace.prompt_set == "a", "argv wins over CRYSTAL_ARGS"
    assert options.process_flags().disable_tool == ["python", "bash"]
    assert options.ask_timeout == 30
    assert to_argv(options.namespace) == ["--prompt-set", "a", "--disable-tool", "python", "--disable-tool", "bash",
                                          "--ask-timeout", "30.0"]
    with pytest.raises(UserError, match="CRYSTAL_ARGS: unknown flags: --bogus"):
        parse([], environ={"CRYSTAL_ARGS": "--bogus"})
    with pytest.raises(UserError, match="--ask-timeout must be a positive"):
        parse(["--ask-timeout", "0"], environ={})


def test_notebook_map_keeps_unknown_fields_and_leaves_corrupt_files(workspace):
    remember(workspace, "/n/a.ipynb", "s1")
    data = json.loads(map_path(workspace).read_text())
    data["extra"] = {"kept": True}
    map_path(workspace).write_text(json.dumps(data))
    remember(workspace, "/n/a.ipynb", "s2")
    assert last_session(workspace, "/n/a.ipynb") == "s2"
    assert json.loads(map_path(workspace).read_text())["extra"] == {"kept": True}
    map_path(workspace).write_text("{not json")
    remember(workspace, "/n/a.ipynb", "s3")
    assert map_path(workspace).read_text() == "{not json"
    with pytest.raises(UserError, match="is not valid JSON"):
        last_session(workspace, "/n/a.ipynb")


def test_crystal_kernel_install_writes_the_kernelspec(tmp_path, private_home):
    crystal = [sys.executable, "-m", "crystal_kernel.cli"]
    # A forced prompt set must exist when installing (tests/jupyter/test_kernel_install.py).
    (private_home / "promptsets" / "strict").mkdir(parents=True)
    (private_home / "promptsets" / "strict" / "prompt.json").write_text('{"name": "Strict", "enabled": false}')
    done = subprocess.run(crystal + ["kernel", "install", "--prefix", str(tmp_path), "--prompt-set", "strict"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    spec = json.loads((tmp_path / "share/jupyter/kernels/crystal/kernel.json").read_text())
    assert spec["display_name"] == "Crystal" and spec["interrupt_mode"] == "message"
    assert spec["argv"][1:] == ["-c", SAFE_LAUNCH, "crystal_kernel.jupyter", "-f", "{connection_file}",
                                "--prompt-set", "strict"]
    # The launcher's tile shows Crystal's logo, not a letter (docs/jupyterlab.md, Launcher).
    folder = tmp_path / "share/jupyter/kernels/crystal"
    assert (folder / "logo-svg.svg").read_text().startswith("<svg")
    for size in (32, 64):
        png = (folder / f"logo-{size}x{size}.png").read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == size
    bad = subprocess.run(crystal + ["kernel", "install", "--prefix", str(tmp_path / "x"), "--disable-tool", "nope"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr == "crystal: --disable-tool: unknown built-in tool 'nope'.\n"
    assert not (tmp_path / "x").exists()
