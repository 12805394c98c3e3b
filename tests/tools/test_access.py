"""Workspace access for every path-taking tool: ../ escapes, absolute paths outside, a
symlink inside pointing outside, credential files, writes to a read-only added dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crystal_kernel.core.access import AccessRules, is_credential_path
from crystal_kernel.core.errors import ToolError
from tests.tools.conftest import call

CREDENTIALS = [
    ".ssh/config", ".ssh/id_rsa", "home/.aws/credentials", ".gnupg/pubring.kbx", ".azure/x", ".kube/config",
    ".password-store/a.gpg", ".docker/config.json", ".netrc", "_netrc", ".git-credentials", ".pypirc",
    ".npmrc", ".pgpass", ".env", ".env.local", "prod.env", "id_rsa", "id_rsa.pub", "id_dsa", "id_ecdsa",
    "id_ed25519", "id_ed25519_sk", "id_ecdsa_sk.pub", "tls.pem", "server.key", "cert.p12", "cert.pfx",
    "store.jks", "release.keystore", "credentials", "credentials.json", "service-account-prod.json",
    "credentials.toml", ".htpasswd", ".my.cnf", ".vault-token", ".boto", ".s3cfg", ".terraformrc",
    "vault.kdbx", ".git/config", "sub/.git/config", ".config/gcloud/creds.db", ".config/gh/hosts.yml",
    ".config/hub", ".terraform.d/credentials.tfrc.json",
]
NOT_CREDENTIALS = [".env.example", ".env.sample", ".env.template", ".env.dist", "src/env.py", "config",
                   ".gitignore", ".git/HEAD", "keys.py", "README.md", "docs/ssh.md"]


@pytest.mark.parametrize("rel", CREDENTIALS)
def test_credential_list(rel: str):
    assert is_credential_path(Path(rel))


@pytest.mark.parametrize("rel", NOT_CREDENTIALS)
def test_not_credentials(rel: str):
    assert not is_credential_path(Path(rel))


READERS = [
    ("read", {}), ("list", {}), ("tree", {}), ("glob", {"pattern": "*"}), ("grep", {"pattern": "x"}),
    ("view_image", {}), ("describe_image", {}),
]
WRITERS = [("write", {"content": "x"}), ("edit", {"old_string": "x", "new_string": "y"})]


@pytest.fixture
def layout(workspace: Path, tmp_path: Path) -> dict[str, Path]:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("x\n")
    os.symlink(outside, workspace / "dirlink")
    os.symlink(outside / "f.txt", workspace / "filelink.txt")
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "f.txt").write_text("x\n")
    return {"outside": outside, "ro": ro}


@pytest.mark.parametrize("tool,extra", READERS + WRITERS)
async def test_outside_paths_refused(ctx, layout, tool: str, extra: dict):
    outside = layout["outside"]
    for path in ("../outside/f.txt", "sub/../../outside", str(outside / "f.txt"), str(outside),
                 "dirlink", "dirlink/f.txt", "filelink.txt", "~"):
        result = await call(tool, ctx, path=path, **extra)
        assert not result.ok, (tool, path)
        assert "is outside the workspace" in result.text and "access refused" in result.text, (tool, path)
    assert (outside / "f.txt").read_text() == "x\n"


@pytest.mark.parametrize("tool,extra", READERS + WRITERS)
async def test_credential_files_refused(ctx, workspace: Path, tool: str, extra: dict):
    (workspace / ".aws").mkdir()
    (workspace / ".aws" / "credentials").write_text("x\n")
    (workspace / "deploy.pem").write_text("x\n")
    for path in (".aws/credentials", "deploy.pem", ".aws"):
        result = await call(tool, ctx, path=path, **extra)
        assert not result.ok and result.text == f"'{path}' is a credential location; access refused.", (tool, path)
    assert (workspace / "deploy.pem").read_text() == "x\n"


@pytest.mark.parametrize("tool,extra", WRITERS)
async def test_write_to_read_only_added_dir_refused(ctx, layout, tool: str, extra: dict):
    ro = layout["ro"]
    ctx.access.add(ro, "ro")
    result = await call(tool, ctx, path=str(ro / "f.txt"), **extra)
    assert not result.ok and f"is in a read-only directory ({ro})" in result.text
    assert (ro / "f.txt").read_text() == "x\n"
    # Reading it is fine.
    assert (await call("read", ctx, path=str(ro / "f.txt"))).ok


def test_authority_outside_for_added_dirs(ctx, layout):
    from crystal_kernel.tools.catalog import load_builtin

    ctx.access.add(layout["ro"], "ro")
    tool = load_builtin("read")
    inside = tool.classify(tool.parse({"path": "a.txt"}), ctx)
    added = tool.classify(tool.parse({"path": str(layout["ro"] / "f.txt")}), ctx)
    assert str(inside.authority) == "workspace" and str(added.authority) == "outside-workspace"


def test_resolve_messages(workspace: Path):
    rules = AccessRules(workspace)
    with pytest.raises(ToolError, match="The path is empty."):
        rules.resolve("  ")
    assert rules.resolve("new/file.txt", write=True) == workspace / "new" / "file.txt"


def test_directories_text_ph_6(workspace: Path, tmp_path: Path):
    rules = AccessRules(workspace)
    assert rules.directories_text() == ""
    (tmp_path / "data").mkdir()
    (tmp_path / "lib").mkdir()
    rules.add(tmp_path / "data", "ro")
    rules.add(tmp_path / "lib", "rw")
    assert rules.directories_text() == (
        "Directories added to this session besides the workspace:\n"
        f"- {(tmp_path / 'data').resolve()} (read only)\n- {(tmp_path / 'lib').resolve()} (read and write)"
    )
