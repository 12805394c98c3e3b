"""A full or read-only ``.crystal/`` folder: a clear one-line error, nothing half
written (the previous session document byte for byte, no temp files left behind).

How the fault is made: as root (here), ``.crystal/`` (and the prompt-set folder in
Home) is a tiny tmpfs mount — filled up for "full", remounted read-only for
"read-only". Without the right to mount, "full" is ``RLIMIT_FSIZE`` in the child
process (a write past the limit fails with EFBIG) and "read-only" is ``chmod 0555``
for non-root users, ``RLIMIT_FSIZE`` 0 for root (chmod does not bind root). docs/reliability.md says which one ran.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from crystal_kernel.testing.llm_server import LLMServer

CRYSTAL = str(Path(sys.executable).parent / "crystal")
# Longer than a page: the session journal appends, and a full tmpfs still takes the few
# bytes that fit in the file's last page (they would be saved, whole) — not this.
SECOND = "Second answer, never saved. " * 400


def can_mount(tmp: Path) -> bool:
    probe = tmp / "probe"
    probe.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
    if done.returncode != 0:
        return False
    subprocess.run(["umount", str(probe)], check=True)
    return True


@contextmanager
def tmpfs(folder: Path, size_kb: int = 512) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(folder)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> None:
    """Fill the file system holding ``folder`` to the last byte."""
    fd = os.open(folder / "filler.bin", os.O_WRONLY | os.O_CREAT)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def env_for(home: Path, server: LLMServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRYSTAL_")}
    env.update({"HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal"), "CRYSTAL_PROVIDER": "openai",
                "CRYSTAL_MODEL": "gpt-4.1", "CRYSTAL_BASE_URL": server.base_url, "CRYSTAL_API_KEY_ENV": "K",
                "K": "k", "CRYSTAL_TOPIC_NAMING": "off"})
    return env


def crystal(args: list[str], env: dict[str, str], fsize: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:  # only in the fallback without mount rights
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run([CRYSTAL, *args], env=env, capture_output=True, text=True, timeout=60,
                          preexec_fn=limit if fsize is not None else None)


@pytest.fixture
def mountable(tmp_path) -> bool:
    if os.environ.get("CRYSTAL_TEST_NO_MOUNT"):  # to exercise the fallback on purpose
        return False
    return os.geteuid() == 0 and can_mount(tmp_path)


def first_turn(ws: Path, env: dict[str, str], server: LLMServer) -> tuple[str, bytes]:
    server.add({"text": "First answer."})
    done = crystal(["run", "First question", "--workspace", str(ws), "--format", "jsonl"], env)
    assert done.returncode == 0, done.stderr
    session_id = [json.loads(line) for line in done.stdout.splitlines()][-1]["sessionId"]
    return session_id, (ws / ".crystal" / "sessions" / f"{session_id}.jsonl").read_bytes()


def assert_clear_and_untouched(done, ws: Path, session_id: str, before: bytes) -> None:
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    errors = [e["message"] for e in events if e["type"] == "error"]
    document = ws / ".crystal" / "sessions" / f"{session_id}.jsonl"
    assert len(errors) == 1 and errors[0].startswith(f"Could not save the session document {document}: "), events
    assert "\n" not in errors[0] and "Traceback" not in done.stderr
    assert events[-1]["type"] == "turn_end" and events[-1]["stopReason"] == "error"
    # The turn's work is not on disk: the command says so and does not exit 0.
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [f"crystal: {errors[0]}"]
    sessions = ws / ".crystal" / "sessions"
    assert (sessions / f"{session_id}.jsonl").read_bytes() == before, "the saved session changed"
    assert not [p.name for p in sessions.iterdir() if p.name.endswith(".tmp")], "a temp file was left behind"


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_session_save_on_a_full_or_read_only_crystal_folder(tmp_path, mountable, fault):
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with LLMServer() as server:
        env = env_for(home, server)
        args = ["run", "Second question", "--workspace", str(ws), "--format", "jsonl"]
        if mountable:
            with tmpfs(ws / ".crystal"):
                session_id, before = first_turn(ws, env, server)
                server.add({"text": SECOND})
                args += ["--resume", session_id]
                if fault == "full":
                    fill(ws / ".crystal")
                else:
                    subprocess.run(["mount", "-o", "remount,ro", str(ws / ".crystal")], check=True)
                done = crystal(args, env)
                assert_clear_and_untouched(done, ws, session_id, before)
        else:
            session_id, before = first_turn(ws, env, server)
            server.add({"text": SECOND})
            args += ["--resume", session_id]
            if fault == "full" or os.geteuid() == 0:  # chmod does not bind root: refuse every write
                done = crystal(args, env, fsize=len(before) // 2 if fault == "full" else 0)
            else:
                (ws / ".crystal" / "sessions").chmod(0o555)
                done = crystal(args, env)
                (ws / ".crystal" / "sessions").chmod(0o755)
            assert_clear_and_untouched(done, ws, session_id, before)
        # The answer itself still reached the person.
        shown = "".join(e.get("text", "") for e in map(json.loads, done.stdout.splitlines()) if e["type"] == "text")
        assert shown == SECOND


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_prompt_set_enable_on_a_full_or_read_only_home(tmp_path, mountable, fault):
    home = tmp_path / "home"
    sets = home / ".crystal" / "promptsets"
    env = {**os.environ, "HOME": str(home), "CRYSTAL_HOME": str(home / ".crystal")}

    def make() -> dict[Path, bytes]:
        for name, enabled in (("alpha", True), ("beta", False)):
            (sets / name).mkdir(parents=True)
            (sets / name / "prompt.json").write_text(json.dumps({"enabled": enabled, "keep": 1}, indent=1))
            (sets / name / "work.md").write_text(f"{name} text")
        return {p: p.read_bytes() for p in sets.rglob("prompt.json")}

    def check(done, before: dict[Path, bytes]) -> None:
        assert done.returncode == 2, (done.returncode, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("crystal: "), done.stderr
        assert {p: p.read_bytes() for p in sets.rglob("prompt.json")} == before
        assert not list(sets.rglob("*.tmp"))

    if mountable:
        with tmpfs(sets, 256):
            before = make()
            if fault == "full":
                fill(sets)
            else:
                subprocess.run(["mount", "-o", "remount,ro", str(sets)], check=True)
            check(crystal(["promptsets", "enable", "beta"], env), before)
    else:
        before = make()
        if fault == "full" or os.geteuid() == 0:
            check(crystal(["promptsets", "enable", "beta"], env, fsize=8 if fault == "full" else 0), before)
        else:
            for folder in sets.iterdir():
                folder.chmod(0o555)
            check(crystal(["promptsets", "enable", "beta"], env), before)
