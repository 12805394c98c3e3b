"""Defer an SDK package's ``__init__`` until something uses it (the own-process fronts only).

``import openai`` runs ``openai/__init__.py``, which imports ``openai.types`` — every
request and response model of the whole API, hundreds of pydantic classes — and
``openai._client`` imports ``openai.lib``, whose ``__init__`` pulls in the Responses
types again. ``crystal run`` needs a handful of them before its first request (the
client, its errors, the streamed chunk model), yet those imports were most of its time
to the first model request (``python -X importtime``).

:func:`defer_package_inits` installs a finder that loads the named packages with
their ``__init__`` deferred: the package module exists at once (with its ``__path__``,
so ``import openai.types.chat.chat_completion_chunk`` loads just that module and the
packages above it), and its own ``__init__`` runs the first time an attribute it would
define is read (``openai.types.ChatModel``, ``from openai.types import X``), so
nothing that uses them sees a difference but the time it is loaded. A package that is
already imported, or that is not a plain source package, is left alone.

Only for processes that run no one else's code (``crystal run``, ``acp``, ``tools`` and
the interactive ``crystal``: cli/__init__.py main()): in the kernel a person's own code
imports the SDKs, and there they stay exactly as shipped.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from importlib.abc import Loader
from importlib.machinery import ModuleSpec, PathFinder
from types import ModuleType
from typing import Any

#: The SDK packages whose ``__init__`` ``crystal run`` does not need before it sends.
#: ``openai`` itself: its ``__init__`` imports ``openai.lib`` (pydantic helpers for
#: structured outputs, Azure, Bedrock) and every type; the chat adapter imports the
#: client and stream classes from their own modules.
OPENAI_DEFERRED = ("openai", "openai.types", "openai.types.chat", "openai.types.responses", "openai.types.shared",
                   "openai.lib")


class _DeferredInit(Loader):
    """A loader that makes the package module now and runs its ``__init__`` on first use."""

    def __init__(self, real: Loader) -> None:
        self.real = real

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        real = self.real

        def __getattr__(name: str) -> Any:
            # A submodule is loaded by itself: ``from . import _exceptions`` inside the
            # SDK asks the package for the name before importing it.
            if not name.startswith("__") and _is_submodule(module, name):
                return importlib.import_module(f"{module.__name__}.{name}")
            # Runs once: the real __init__ then defines the module's names (and this
            # hook is gone before it runs, so a name it does not define is an
            # AttributeError as usual).
            module.__dict__.pop("__getattr__", None)
            real.exec_module(module)
            return getattr(module, name)

        # The module-level __getattr__ hook (PEP 562) lives in the module's namespace.
        module.__dict__["__getattr__"] = __getattr__


def _is_submodule(package: ModuleType, name: str) -> bool:
    """Whether ``package`` has a submodule ``name`` (found on disk, not imported)."""
    return PathFinder.find_spec(f"{package.__name__}.{name}", package.__path__) is not None


class _DeferringFinder:
    """A ``sys.meta_path`` finder for the packages named (each once)."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in self.names:
            return None
        self.names.discard(fullname)
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not spec.submodule_search_locations \
                or not hasattr(spec.loader, "exec_module") or not str(spec.origin or "").endswith(".py"):
            return spec
        spec.loader = _DeferredInit(spec.loader)
        return spec


def defer_package_inits(names: tuple[str, ...] = OPENAI_DEFERRED) -> bool:
    """Defer the ``__init__`` of each package in ``names`` (see the module docstring).
    Does nothing once the top-level package is imported: a loaded SDK is never changed."""
    if any(name.split(".")[0] in sys.modules for name in names):
        return False
    if any(isinstance(f, _DeferringFinder) for f in sys.meta_path):
        return False
    sys.meta_path.insert(0, _DeferringFinder(tuple(names)))
    return True
