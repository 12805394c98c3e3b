"""search: FTS5 index under .crystal/index, BM25 with names weighted, incremental by
modification time, snippets, bounded indexing, refusals."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from crystal_kernel.tools import _index
from crystal_kernel.tools._index import SearchIndex, fts_query, index_for, split_words
from tests.tools.conftest import call, write_files


def populate(ws: Path) -> None:
    files = {
        "src/session_store.py": "class SessionStore:\n    def save(self): ...\n    def resume(self, id): ...\n",
        "src/retry.py": "def backoff(attempt):\n    # exponential backoff after a 429 rate limit\n    return 2 ** attempt\n",
        "docs/notes.md": "The session store keeps documents. Nothing about retries here.\n",
        "README.md": "A project. It mentions session once.\n",
        "ignored/big.log": "session store session store\n",
        ".gitignore": "ignored/\n",
    }
    write_files(ws, files)


def test_split_words_and_query():
    assert split_words("SessionStore_v2 HTTPServer x") == ["session", "store", "v", "2", "http", "server", "x"]
    assert fts_query("rate-limit") == '"rate" OR "limit"'
    assert fts_query('SessionStore "quoted"') == '("session store" OR "sessionstore") OR "quoted"'
    assert fts_query("!!!") == ""


async def test_ranks_files_with_name_weight_and_snippets(ctx, workspace: Path):
    populate(workspace)
    result = await call("search", ctx, query="session store")
    assert result.ok
    lines = result.text.splitlines()
    assert lines[0] == "1. src/session_store.py"
    assert "docs/notes.md" in result.text and "ignored/big.log" not in result.text
    assert "»session« »store«" in result.text  # the snippet from docs/notes.md
    assert (workspace / ".crystal" / "index" / "search.sqlite").is_file()


async def test_content_query_and_limit(ctx, workspace: Path):
    populate(workspace)
    result = await call("search", ctx, query="exponential backoff 429", limit=1)
    assert result.text.splitlines()[0] == "1. src/retry.py"
    assert "2." not in result.text
    assert "»backoff«" in result.text


async def test_incremental_updates(ctx, workspace: Path):
    populate(workspace)
    await call("search", ctx, query="session")
    index = index_for(workspace)
    # Unchanged tree: nothing re-read.
    assert index.refresh(force=True) == (0, 0)
    (workspace / "src" / "new_feature.py").write_text("def zebra_crossing(): pass\n")
    (workspace / "README.md").unlink()
    p = workspace / "docs" / "notes.md"
    p.write_text("now about giraffes\n")
    os.utime(p, (1, 1))
    assert index.refresh(force=True) == (2, 1)
    assert "new_feature.py" in (await call("search", ctx, query="zebra")).text
    assert "docs/notes.md" in (await call("search", ctx, query="giraffes")).text


async def test_own_tools_make_next_search_fresh(ctx, workspace: Path):
    populate(workspace)
    await call("search", ctx, query="session")
    await call("write", ctx, path="src/okapi.py", content="okapi = 1\n")
    assert "src/okapi.py" in (await call("search", ctx, query="okapi")).text
    await call("bash", ctx, command="echo 'narwhal' > src/narwhal.txt")
    assert "src/narwhal.txt" in (await call("search", ctx, query="narwhal")).text


async def test_bounded_indexing_binary_and_huge(ctx, workspace: Path, monkeypatch):
    monkeypatch.setattr(_index, "MAX_BODY_BYTES", 1000)
    (workspace / "huge.txt").write_text("early words\n" + "filler\n" * 10000 + "latecomer\n")
    (workspace / "blob_data.bin").write_bytes(b"\x00\x01 binaryword \x02" * 100)
    assert "huge.txt" in (await call("search", ctx, query="early")).text
    assert (await call("search", ctx, query="latecomer")).text.startswith("No files match")
    assert (await call("search", ctx, query="binaryword")).text.startswith("No files match")
    assert "blob_data.bin" in (await call("search", ctx, query="blob data")).text


async def test_credentials_never_indexed(ctx, workspace: Path):
    (workspace / "server.pem").write_text("privatekeymaterial\n")
    (workspace / "credentials.json").write_text("privatekeymaterial\n")
    assert (await call("search", ctx, query="privatekeymaterial")).text.startswith("No files match")


async def test_corrupt_index_is_rebuilt(ctx, workspace: Path):
    populate(workspace)
    folder = workspace / ".crystal" / "index"
    folder.mkdir(parents=True)
    (folder / "search.sqlite").write_bytes(b"this is not a database" * 100)
    result = await call("search", ctx, query="backoff")
    assert result.ok and "src/retry.py" in result.text
    conn = sqlite3.connect(folder / "search.sqlite")
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] >= 4


async def test_refusals_and_no_match(ctx, workspace: Path):
    populate(workspace)
    result = await call("search", ctx, query="?!")
    assert not result.ok and result.text == "The query has no words to search for."
    result = await call("search", ctx, query="qwertyuiop")
    assert result.ok and result.text.startswith("No files match 'qwertyuiop'")
    assert not (await call("search", ctx, query="x", limit=0)).ok
    assert not (await call("search", ctx, query="x", limit=51)).ok


async def test_output_truncated(ctx, workspace: Path):
    for i in range(30):
        (workspace / f"doc{i}.md").write_text("common word " * 50)
    ctx.config.tool_output_limit = 300
    result = await call("search", ctx, query="common word", limit=30)
    assert "characters cut" in result.text


def test_index_object_is_shared_per_workspace(workspace: Path):
    assert index_for(workspace) is index_for(workspace / ".")
    assert isinstance(index_for(workspace), SearchIndex)


async def test_index_corrupted_while_open_is_rebuilt(ctx, workspace: Path):
    populate(workspace)
    await call("search", ctx, query="backoff")
    db = workspace / ".crystal" / "index" / "search.sqlite"
    index_for(workspace).conn.close()  # type: ignore[union-attr]
    index_for(workspace).conn = None
    db.write_bytes(b"garbage" * 1000)
    (workspace / "src" / "extra.py").write_text("backoff again\n")
    _index.note_change(workspace)
    result = await call("search", ctx, query="backoff")
    assert result.ok and "src/retry.py" in result.text and "src/extra.py" in result.text
