"""``{{name}}`` binding in one pass (PH-1, PH-8, PH-9).

A template's tokens are its declaration (PH-10): a slot's value is computed only when
the text names it, so a template pays only for the slots it uses. Values are inserted as
text and never scanned again, so a ``{{token}}`` inside a value stays literal. A lazy
resolver that raises or gives no text leaves its token in place and adds an English
note; an unknown name is left as written (it may be prose about templates).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

# `{{name}}`, with optional spaces inside the braces.
TOKEN_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")

Resolver = Callable[[], object]
_MISSING = object()


def slots_in(text: str) -> list[str]:
    """The placeholder names a template uses, first-seen order (its PH-10 declaration)."""
    seen: dict[str, None] = {}
    for match in TOKEN_RE.finditer(text):
        seen.setdefault(match.group(1), None)
    return list(seen)


class Binder:
    """Binds templates against fixed values and lazy resolvers.

    ``values`` are inserted as given (an empty string is a real value). ``lazy``
    resolvers run at most once per binder, on first use; ``None``, a non-string, or an
    exception leaves the token and adds one note to ``notes``. ``labels`` names the owner
    of a lazy resolver (e.g. a plugin) for that note.
    """

    def __init__(self, values: Mapping[str, str] | None = None,
                 lazy: Mapping[str, Resolver] | None = None,
                 notes: list[str] | None = None,
                 labels: Mapping[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(values or {})
        self.lazy: dict[str, Resolver] = dict(lazy or {})
        self.notes: list[str] = notes if notes is not None else []
        self.labels = dict(labels or {})
        self._cache: dict[str, object] = {}

    def _value(self, name: str) -> object:
        if name in self.values:
            return self.values[name]
        if name in self._cache:
            return self._cache[name]
        resolver = self.lazy.get(name)
        if resolver is None:
            return _MISSING
        owner = self.labels.get(name)
        where = f" (from {owner})" if owner else ""
        try:
            value = resolver()
        except Exception as exc:  # PH-9: a failing resolver never breaks composition
            self.notes.append(f"Placeholder {{{{{name}}}}}{where} failed and was left as is: "
                              f"{type(exc).__name__}: {exc}")
            value = _MISSING
        else:
            if not isinstance(value, str):
                self.notes.append(f"Placeholder {{{{{name}}}}}{where} returned no text and was "
                                  "left as is.")
                value = _MISSING
        self._cache[name] = value
        return value

    def _replace(self, match: re.Match[str]) -> str:
        value = self._value(match.group(1))
        return value if isinstance(value, str) else match.group(0)  # _MISSING: left as is

    def bind(self, text: str) -> str:
        """One pass over ``text``; inserted values are never re-expanded."""
        if "{{" not in text:
            return text
        return TOKEN_RE.sub(self._replace, text)


def bind(text: str, values: Mapping[str, str], notes: list[str] | None = None) -> str:
    """Convenience: bind fixed values in one pass."""
    return Binder(values, notes=notes).bind(text)
