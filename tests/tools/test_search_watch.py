"""search's freshness check on an unchanged tree (the scale target: under 100 ms on
50,000 files): folder watches (tools/_watch.py) tell that nothing changed without
listing or stating the tree; any change, a lost event or a missing inotify means the
full check, so a change made outside the agent's tools is still found."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from crystal_kernel.tools import _index, _watch
from crystal_kernel.tools._index import SearchIndex
from tests.tools.test_search import populate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


class Listing:
    """Counts the full checks (each lists the tree)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = _index._list_files

        def counted(root: Path) -> list[str]:
            self.calls += 1
            return real(root)

        monkeypatch.setattr(_index, "_list_files", counted)


def ready(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[SearchIndex, Listing]:
    populate(workspace)
    (workspace / "src" / "empty").mkdir()
    index = SearchIndex(workspace)
    listing = Listing(monkeypatch)
    index.refresh(force=True)  # builds the index and the watches
    index.refresh(force=True)  # folders watched only now: checked once more
    assert index.watch is not None and not index.full_due
    listing.calls = 0
    return index, listing


def test_unchanged_tree_is_known_without_listing_it(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    index, listing = ready(workspace, monkeypatch)
    for _ in range(3):
        assert index.refresh(force=True) == (0, 0)
    assert index.query("session store", 5)  # the index's own writes are not changes
    assert index.refresh(force=True) == (0, 0)
    assert listing.calls == 0
    index.close()


@pytest.mark.parametrize("change", ["write in place", "new file", "delete", "rename", "new file in empty folder"])
def test_a_change_made_outside_the_tools_is_found_by_the_next_check(change: str, workspace: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    index, listing = ready(workspace, monkeypatch)
    if change == "write in place":
        with open(workspace / "src" / "retry.py", "a") as handle:  # the folder's mtime does not move
            handle.write("# giraffe\n")
        expected = (1, 0)
    elif change == "new file":
        (workspace / "docs" / "zebra.md").write_text("zebra\n")
        expected = (1, 0)
    elif change == "delete":
        (workspace / "README.md").unlink()
        expected = (0, 1)
    elif change == "rename":
        os.rename(workspace / "docs" / "notes.md", workspace / "docs" / "renamed.md")
        expected = (1, 1)
    else:
        (workspace / "src" / "empty" / "okapi.py").write_text("okapi = 1\n")
        expected = (1, 0)
    assert index.refresh(force=True) == expected
    assert listing.calls == 1
    index.close()


def test_without_inotify_or_past_the_watch_bound_every_check_is_full(workspace: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    populate(workspace)
    listing = Listing(monkeypatch)
    monkeypatch.setattr(_index, "open_watch", lambda: None)
    index = SearchIndex(workspace)
    for _ in range(3):
        index.refresh(force=True)
    assert listing.calls == 3
    index.close()
    monkeypatch.undo()
    listing = Listing(monkeypatch)
    monkeypatch.setattr(_watch, "MAX_WATCHES", 2)
    index = SearchIndex(workspace)
    for _ in range(3):
        index.refresh(force=True)
    assert index.watch is not None and index.watch.broken
    assert listing.calls == 3
    index.close()


def test_the_full_check_still_runs_every_so_often(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    index, listing = ready(workspace, monkeypatch)
    monkeypatch.setattr(_index, "FULL_CHECK_SECONDS", 0.0)
    assert index.refresh(force=True) == (0, 0)
    assert listing.calls == 1
    index.close()
