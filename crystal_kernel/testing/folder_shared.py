"""One resource (a kernel, a ``jupyter lab``) shared by the test modules of one folder.

Started by the first test that asks for it and stopped once the next test is outside the
folder (or none is left), not at the end of the session: a process left running is a
child of pytest that later folders' tests would see (tests/conftest.py fails a module
that leaves one). The process carries :data:`SHARED_IN_FOLDER` naming the folder, which
tells that check to leave it alone while the next test is still in the folder.

A folder's conftest uses it as::

    _shared = FolderShared(Path(__file__).resolve().parent)

    @pytest.fixture
    def shared_kernel(...):
        return _shared.get(lambda: start_kernel(..., env_extra=_shared.env()), Kernel.stop)

    def pytest_runtest_teardown(item, nextitem):
        _shared.teardown(nextitem)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

#: The environment variable that marks a process a folder shares across its modules.
SHARED_IN_FOLDER = "CRYSTAL_TEST_SHARED_IN_FOLDER"

T = TypeVar("T")


class FolderShared(Generic[T]):
    """Holds at most one started resource for the test folder ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._value: T | None = None
        self._stop: Callable[[T], None] | None = None

    def env(self) -> dict[str, str]:
        """The variable to put in the shared process's environment."""
        return {SHARED_IN_FOLDER: str(self.folder)}

    def get(self, start: Callable[[], T], stop: Callable[[T], None]) -> T:
        """The running resource, started with ``start()`` the first time; ``stop(it)``
        ends it once the folder's tests are done."""
        if self._value is None:
            self._value = start()
            self._stop = stop
        return self._value

    def teardown(self, nextitem: Any) -> None:
        """Call from the folder's ``pytest_runtest_teardown``: stops the resource when the
        next test (a pytest item, or None at the end) is outside the folder."""
        if self._value is None or (nextitem is not None and self.folder in Path(nextitem.path).parents):
            return
        value, stop = self._value, self._stop
        self._value, self._stop = None, None
        assert stop is not None
        stop(value)
