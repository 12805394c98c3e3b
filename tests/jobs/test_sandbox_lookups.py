"""What a sandboxed call looks up on every call is kept between calls only where the
answer cannot change behind it (~0.6 ms of an exec tool's own work, docs/benchmarks.md):
the bwrap program found on PATH is checked again at each ask, and the credential
folders follow HOME (SANDBOX-2)."""

from __future__ import annotations

from pathlib import Path

from crystal_kernel.jobs import bwrap, sandbox


def test_a_bwrap_removed_since_the_last_call_is_not_used(tmp_path: Path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text("#!/bin/sh\nexit 0\n")  # "works": its probe exits 0
    fake.chmod(0o755)
    monkeypatch.delenv(bwrap.BWRAP_ENV, raising=False)
    monkeypatch.setenv("PATH", str(folder))
    assert bwrap.program() == str(fake)
    assert bwrap.program() == str(fake)  # kept
    fake.unlink()
    assert bwrap.program() is None
    other = tmp_path / "other"
    other.mkdir()
    moved = other / "bwrap"
    moved.write_text("#!/bin/sh\nexit 0\n")
    moved.chmod(0o755)
    monkeypatch.setenv("PATH", str(other))
    assert bwrap.program() == str(moved)


def test_the_credential_folders_follow_home(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "a"))
    first = sandbox.credential_folders()
    assert str(tmp_path / "a" / ".ssh") in first and str(tmp_path / "a" / ".netrc") in first
    monkeypatch.setenv("HOME", str(tmp_path / "b"))
    second = sandbox.credential_folders()
    assert str(tmp_path / "b" / ".ssh") in second and not any(p.startswith(str(tmp_path / "a")) for p in second)
    second.append("changed")  # a caller's list is its own
    assert "changed" not in sandbox.credential_folders()


def test_bwrap_hides_every_credential_name_there_is_and_only_those(tmp_path: Path, monkeypatch):
    """Absent credential paths are left out before they are resolved (~290 lookups a
    call otherwise); a folder, a file and a link to elsewhere are each still covered,
    at the place they lead to (SANDBOX-2)."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / ".aws").symlink_to(elsewhere)
    monkeypatch.setenv("HOME", str(home))
    hidden = sandbox.credential_folders()
    assert str(home / ".gnupg") in hidden and not (home / ".gnupg").exists()
    args = bwrap.arguments("/usr/bin/bwrap", roots=(), readable=(), protected=(), allowed=(), hidden=hidden,
                           temp=None, network=False, whole_system=True)
    covered = {args[i + 2] for i, item in enumerate(args[:-2]) if item in ("--tmpfs", "--ro-bind")
               and (item == "--tmpfs" or args[i + 1] == "/dev/null")}
    covered |= {args[i + 1] for i, item in enumerate(args[:-1]) if item == "--tmpfs"}
    for shown in (home / ".ssh", home / ".netrc", elsewhere):
        assert str(shown) in covered, (shown, args)
    assert not any(str(home / ".gnupg") in item for item in args)
