"""rfc3987_syntax, imported when first used, for the labs and kernels of the browser tests.

jsonschema imports rfc3987_syntax whenever it is installed (for its "iri" formats), and
rfc3987_syntax builds some forty parsers as it is imported: ~1.7 CPU-s in every process
that imports nbformat or jupyter_server, each ``jupyter lab`` start included. This
module, first on the PYTHONPATH of the processes tests/e2e/conftest.py starts, stands in
for it: its attributes are the real module's, which is imported (from the next entry of
sys.path) the first time one is asked for. What a check sees is unchanged; only when the
parsers are built changes.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_HERE = Path(__file__).resolve().parent.parent
_real: ModuleType | None = None


def _load() -> ModuleType:
    global _real
    if _real is None:
        me = sys.modules.pop(__name__)
        path = sys.path[:]
        sys.path[:] = [p for p in path if Path(p or ".").resolve() != _HERE]
        try:
            _real = importlib.import_module(__name__)
        finally:
            sys.path[:] = path
            sys.modules[__name__] = me
    return _real


def is_valid_syntax(term: str, value: str) -> bool:
    return bool(_load().is_valid_syntax(term, value))


def __getattr__(name: str) -> Any:
    return getattr(_load(), name)
