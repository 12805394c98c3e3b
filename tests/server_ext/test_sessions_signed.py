"""TRUST-7 in the sidebar's list: ``GET sessions`` says which sessions the Home of the
server's Crystal kernels signed (server/signed.py), read from that Home's key as it is
now. A real in-process jupyter_server with the Crystal extension."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from crystal_kernel.host import grants
from crystal_kernel.jupyter.kernelspec import kernel_json, write_kernelspec
from tests.server_ext.test_sessions import write_session

OWN = "20261130-050000-abc123"


def signed_rows(api) -> dict[str, bool]:
    status, data = api("GET", "sessions")
    assert status == 200, data
    return {row["id"]: row["signed"] for row in data["sessions"]}


def save_signed(root: Path, home: Path, session_id: str, **extra) -> None:
    from crystal_kernel.host.store import SessionStore

    doc = write_session(root, session_id, **extra)
    SessionStore(root, home).save(doc)  # as the kernel saves it: signed with its Home's key


def test_trust7_sessions_list_checks_with_the_home_the_crystal_kernelspec_gives(api, jp_root_dir, jp_data_dir,
                                                                             tmp_path):
    """A Crystal kernelspec whose env names its own CRYSTAL_HOME: the sessions that Home
    signed are signed; one the server's own Home signed, and a planted copy, are not."""
    kernel_home = tmp_path / "kernel-home"
    spec = kernel_json()
    spec["env"] = {"CRYSTAL_HOME": str(kernel_home)}
    write_kernelspec(Path(jp_data_dir) / "kernels" / "crystal-own-home", spec)
    save_signed(jp_root_dir, kernel_home, OWN)
    save_signed(jp_root_dir, Path(os.environ["CRYSTAL_HOME"]), "20261130-060000-srvhome",
                updated="2026-11-30T06:00:00+00:00")
    sessions = Path(jp_root_dir) / ".crystal" / "sessions"
    shutil.copy2(sessions / f"{OWN}.jsonl", sessions / "20261130-070000-planted.jsonl")
    assert signed_rows(api) == {OWN: True, "20261130-060000-srvhome": False, "20261130-070000-planted": False}


def test_trust7_a_home_made_again_is_read_with_its_new_key(api, jp_root_dir, monkeypatch):
    """No Crystal kernelspec names a Home: the server's own is the kernels'. A Home removed
    and made again (a new key, written by a kernel) is read as it is now, not as the
    server first read it."""
    home = Path(os.environ["CRYSTAL_HOME"])
    save_signed(jp_root_dir, home, OWN)
    assert signed_rows(api) == {OWN: True}
    shutil.rmtree(home)
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"topicNaming": False}))
    monkeypatch.setattr(grants, "_keys", {})  # the kernel is another process: it makes a new key
    save_signed(jp_root_dir, home, "20261201-050000-newkey", updated="2026-12-01T05:00:00+00:00")
    assert signed_rows(api) == {OWN: False, "20261201-050000-newkey": True}
