"""Credential files (TRUST-4): the listing tools judge each found file by
its path in the allowed folder, not below the search root, so `grep` in `.git` or
`.config` reads nothing `read` refuses; the list covers common secret files, matched
case-insensitively."""

from __future__ import annotations

import pytest

from crystal_kernel.core.access import AccessRules
from crystal_kernel.core.errors import ToolError
from crystal_kernel.core.interaction import NoPerson
from crystal_kernel.host.bootstrap import SessionOptions, open_session
from crystal_kernel.testing.scripted import ScriptedProvider

TOKEN = "ghp_SECRETTOKEN1234567890"
SECRET_FILES = [".envrc", "prod.tfstate", "prod.tfstate.backup", "server.ppk", ".yarnrc.yml", ".npmrc",
                ".pypirc", ".netrc", ".bash_history", ".zsh_history", "secrets.yml", "Secrets.YAML",
                "rclone.conf", "credentials.json", "ID_RSA", ".ENV", "config/secrets.yaml"]


async def call(session, name: str, arguments: dict):
    await session.prepare_tools()
    tool = session.tool(name)
    ctx = session.tool_context(NoPerson(), call_id="c1")
    try:
        return await tool.run(tool.parse(arguments), ctx)
    except ToolError as exc:
        return exc


@pytest.fixture
def session(workspace):
    git = workspace / ".git"
    git.mkdir()
    (git / "config").write_text(f'[remote "origin"]\n\turl = https://x:{TOKEN}@github.com/a/b\n')
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    cfg = workspace / ".config" / "gh"
    cfg.mkdir(parents=True)
    (cfg / "hosts.yml").write_text(f"github.com:\n  oauth_token: {TOKEN}\n")
    (workspace / ".config" / "other.txt").write_text("not secret\n")
    for name in SECRET_FILES:
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"value = {TOKEN}\n")
    (workspace / "app.py").write_text("print('hello')\n")
    return open_session(SessionOptions(workspace, provider=ScriptedProvider([])))


@pytest.mark.parametrize("folder", [".git", ".config", ".config/gh", "."])
async def test_grep_glob_tree_under_a_credential_parent_read_nothing(session, folder):
    grep = await call(session, "grep", {"pattern": "ghp_|oauth|url", "path": folder})
    assert TOKEN not in str(getattr(grep, "text", grep))
    found = await call(session, "glob", {"pattern": "**/*", "path": folder})
    listed = str(getattr(found, "text", found)).splitlines()
    assert not [line for line in listed if line.endswith(".git/config") or line.endswith("hosts.yml")]
    tree = await call(session, "tree", {"path": folder, "depth": 3})
    assert "hosts.yml" not in str(getattr(tree, "text", tree))


async def test_grep_in_git_still_finds_ordinary_files(session):
    result = await call(session, "grep", {"pattern": "refs/heads", "path": ".git"})
    assert "HEAD" in result.text and TOKEN not in result.text


@pytest.mark.parametrize("name", SECRET_FILES)
def test_read_refuses_common_secret_files_in_any_case(workspace, name):
    rules = AccessRules(workspace)
    with pytest.raises(ToolError, match="credential location"):
        rules.resolve(name)


async def test_grep_over_the_workspace_prints_no_secret_file(session):
    result = await call(session, "grep", {"pattern": "value|hello", "path": "."})
    assert "app.py" in result.text and TOKEN not in result.text
    result = await call(session, "search", {"query": "value"})
    assert TOKEN not in result.text and "tfstate" not in result.text and "secrets" not in result.text.lower()
