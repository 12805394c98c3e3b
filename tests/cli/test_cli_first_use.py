"""What a person tries first with the `crystal` command (SPEC §11): `--version`, help text
on every option of every subcommand, and the way back into a `crystal run` session."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from crystal_kernel import __version__
from crystal_kernel.cli import build_parser
from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")


def run(args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CRYSTAL, *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, **(env or {})})


def test_version_prints_the_version() -> None:
    out = run(["--version"])
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"crystal {__version__}\n"


def _parsers(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.ArgumentParser, str | None]]:
    """Every parser under ``parser``, with its command path and its help in the list above it."""
    found: list[tuple[str, argparse.ArgumentParser, str | None]] = [(path, parser, "top")]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                for entry in _parsers(sub, f"{path} {name}"):
                    found.append(entry if entry[1] is not sub else (entry[0], sub, helps.get(name)))
    return found


def test_every_subcommand_and_option_has_help_text() -> None:
    missing = []
    for path, parser, help_text in _parsers(build_parser(), "crystal"):
        if not help_text:
            missing.append(f"{path} (the subcommand)")
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or action.dest == "help":
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == [], "options without help text:\n" + "\n".join(missing)


def test_text_mode_ends_with_the_session_id_and_how_to_resume_on_stderr(workspace: Path, tmp_path: Path) -> None:
    env = {"CRYSTAL_PROVIDER": "openai", "CRYSTAL_MODEL": "gpt-test", "OPENAI_API_KEY": "sk-test"}
    with LLMServer([{"text": "First answer."}, {"text": "Second answer."}, {"text": "Third."}]) as server:
        env["CRYSTAL_BASE_URL"] = server.base_url
        first = run(["run", "hello", "--workspace", str(workspace)], env, cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        assert first.stdout == "First answer.\n"  # stdout stays the answer alone
        last = first.stderr.strip().splitlines()[-1]
        session_id = last.split()[1]
        assert last == (f"Session {session_id} saved; continue it with: crystal run --resume {session_id} "
                        f"--workspace {workspace} \"…\"")
        assert (workspace / ".crystal" / "sessions" / f"{session_id}.jsonl").is_file()
        # The line's command works as written (run from the same folder).
        again = run(["run", "--resume", session_id, "--workspace", str(workspace), "and now?"], env, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert again.stdout == "Second answer.\n"
        assert again.stderr.strip().splitlines()[-1].startswith(f"Session {session_id} saved;")
        # From inside the workspace the line needs no --workspace.
        here = run(["run", "hi"], env, cwd=workspace)
        assert here.returncode == 0, here.stderr
        new_id = here.stderr.strip().splitlines()[-1].split()[1]
        assert here.stderr.strip().splitlines()[-1] == (
            f"Session {new_id} saved; continue it with: crystal run --resume {new_id} \"…\"")
        # A slash command alone writes no session, so there is nothing to resume.
        command = run(["run", "/approval edit"], env, cwd=workspace)
        assert command.returncode == 0 and "continue it with" not in command.stderr, command.stderr
