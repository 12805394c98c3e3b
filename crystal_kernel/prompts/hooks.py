"""The prompt-side plugin hooks (PH-8, PA-7), each plugin called on its own so that one
that raises becomes an English note and never a crash.

Plugins are consulted in load (registration) order: for a placeholder name two plugins
add, the first loaded keeps it; ``on_prompt`` appends in load order; ``rewrite_prompt``
answers are applied in load order, each seeing the text so far, so the last non-None
answer wins.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from crystal_kernel.plugins import plugin_manager
from crystal_kernel.prompts.names import HOST_SLOTS

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _impls(hook_name: str) -> list[Any]:
    caller = getattr(plugin_manager().hook, hook_name, None)
    if caller is None:
        return []
    return list(caller.get_hookimpls())


def plugin_placeholders(context: Any, notes: list[str]) -> tuple[dict[str, Callable[[], object]], dict[str, str]]:
    """PH-8: ``(resolvers, owners)`` for plugin placeholder names. Resolvers take no
    arguments (the context is bound in); an empty string counts as no text (PH-9)."""
    resolvers: dict[str, Callable[[], object]] = {}
    owners: dict[str, str] = {}
    for impl in _impls("crystal_placeholders"):
        plugin = impl.plugin_name
        try:
            mapping = impl.function()
        except Exception as exc:
            notes.append(f"Plugin '{plugin}' failed to list its placeholders: {type(exc).__name__}: {exc}")
            continue
        if mapping is None:
            continue
        if not isinstance(mapping, dict):
            notes.append(f"Plugin '{plugin}' returned placeholders that are not a name -> resolver mapping; ignored.")
            continue
        for name, fn in mapping.items():
            if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or not callable(fn):
                notes.append(f"Plugin '{plugin}' offered an invalid placeholder {name!r}; ignored.")
            elif name in HOST_SLOTS:
                notes.append(f"Plugin '{plugin}' cannot take the placeholder {{{{{name}}}}}: the host owns it.")
            elif name in resolvers:
                notes.append(f"Plugin '{plugin}' also offers {{{{{name}}}}}; {owners[name]} loaded first and keeps it.")
            else:
                resolvers[name] = _bound(fn, context)
                owners[name] = f"plugin '{plugin}'"
    return resolvers, owners


def _bound(fn: Callable[[Any], object], context: Any) -> Callable[[], object]:
    def resolve() -> object:
        value = fn(context)
        return value if value != "" else None
    return resolve


def on_prompt(kind: str, text: str, context: Any, notes: list[str]) -> str:
    """PA-7: append each plugin's ``on_prompt`` text, in load order."""
    return _fold("crystal_on_prompt", "on_prompt", kind, text, context, notes,
                 lambda text, extra: append_block(text, extra) if isinstance(extra, str) and extra else text)


def rewrite_prompt(kind: str, text: str, context: Any, notes: list[str]) -> str:
    """PA-7: a plugin's ``rewrite_prompt`` may replace the whole result."""
    return _fold("crystal_rewrite_prompt", "rewrite_prompt", kind, text, context, notes,
                 lambda text, replaced: replaced if isinstance(replaced, str) else text)


def _fold(hook_name: str, label: str, kind: str, text: str, context: Any, notes: list[str],
          combine: Callable[[str, object], str]) -> str:
    """Call each plugin's ``hook_name`` in load order with the text so far, and let
    ``combine`` fold its answer in; a plugin that raises becomes a note."""
    for impl in _impls(hook_name):
        try:
            answer = _call(impl, kind=kind, text=text, context=context)
        except Exception as exc:
            notes.append(f"Plugin '{impl.plugin_name}' {label} failed: {type(exc).__name__}: {exc}")
            continue
        text = combine(text, answer)
    return text


def _call(impl: Any, **available: Any) -> object:
    """Call a hook implementation with the arguments it declares (pluggy lets a plugin
    accept a subset)."""
    return impl.function(**{name: available[name] for name in impl.argnames if name in available})


def append_block(text: str, extra: str) -> str:
    """Appended blocks are separated by one blank line; nothing already there is removed."""
    if not text:
        return extra
    if not text.endswith("\n"):
        text += "\n"
    return text + "\n" + extra
