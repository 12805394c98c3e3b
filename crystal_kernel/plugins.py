"""Plugins: packages discovered through the ``crystal_kernel.plugins`` entry-point group,
with pluggy hooks (SPEC §10, PH-8, PA-7).

Hooks (all optional for a plugin):
- ``crystal_placeholders()`` -> ``dict[str, Callable[[PromptContext], str | None]]``: extra
  ``{{name}}`` placeholders. The host refuses names it owns; for a name two plugins add,
  the first loaded keeps it (PH-8).
- ``crystal_on_prompt(kind, text, context)`` -> ``str | None``: text appended to the Work,
  Plan or Review system text after attachments (PA-7).
- ``crystal_rewrite_prompt(kind, text, context)`` -> ``str | None``: replaces the whole
  composed text (PA-7). The last non-None answer wins.
- ``crystal_tools(context)`` -> ``list[Tool]``: in-process tool sets, under the same naming,
  catalog and approval rules as exec tools (external floor).
- ``crystal_providers()`` -> ``dict[str, Callable[[Config], Provider]]``: more providers.
- ``crystal_builtin_tools()`` -> ``dict[str, type[Tool]]``: Crystal's own parts only. The
  built-in tools (:mod:`crystal_kernel.tools.builtins`) and the jupyter front's notebook
  tools (:mod:`crystal_kernel.jupyter.notebook_plugin`) implement the names the catalog
  reserves (MODE-7); a name that no registered part implements is an error.

Built-in parts register through the same plugin manager a plugin does, under names
starting with :data:`BUILTIN_PREFIX`, and are imported without a guard: a broken
built-in fails loudly. A third-party plugin that raises is reported as a note and never
takes the session down.
"""

# pyright: reportReturnType=false
# (The hook specifications below have no body: plugins implement them. mypy's override for
# this module in pyproject.toml says the same: disable_error_code empty-body.)

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from importlib.metadata import EntryPoint, distributions
from typing import Any

import pluggy

PROJECT = "crystal_kernel"
ENTRY_POINT_GROUP = "crystal_kernel.plugins"
# The names Crystal's own parts register under (never an entry point's name).
BUILTIN_PREFIX = "crystal:"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class CrystalHookSpecs:
    @hookspec
    def crystal_placeholders(self) -> dict[str, Callable[[Any], str | None]]:
        """Extra placeholder resolvers by name."""

    @hookspec
    def crystal_on_prompt(self, kind: str, text: str, context: Any) -> str | None:
        """Text to append to a composed Work/Plan/Review system text."""

    @hookspec
    def crystal_rewrite_prompt(self, kind: str, text: str, context: Any) -> str | None:
        """A replacement for the whole composed text, or None."""

    @hookspec
    def crystal_tools(self, context: Any) -> list[Any]:
        """In-process tools (crystal_kernel.tools.base.Tool instances)."""

    @hookspec
    def crystal_providers(self) -> dict[str, Callable[[Any], Any]]:
        """Provider factories by config name."""

    @hookspec
    def crystal_builtin_tools(self) -> dict[str, type]:
        """Crystal's own built-in tool classes by reserved name (not for third parties)."""


_manager: pluggy.PluginManager | None = None
_load_notes: list[str] = []


def declares_entry_points(group: str) -> bool:
    """Whether a distribution that ``importlib.metadata`` finds may declare entry points
    in ``group``; True when unsure.

    ``entry_points(group=...)`` builds every installed distribution and parses every
    ``entry_points.txt`` to select one group (~8 ms of each start here, and pydantic does
    it once more for its own group). A group is declared by a ``[group]`` line, so
    reading the files raw and finding none settles it in ~3 ms. Anything this quick read
    does not cover (a zip or egg on ``sys.path``, a finder with distributions of its own)
    answers True, and the caller asks ``importlib.metadata`` as before."""
    header = f"[{group}]".encode()
    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        return True
    for entry in plugin_search_path():
        folder = entry or "."
        if entry.endswith(".egg") or (os.path.exists(folder) and not os.path.isdir(folder)):
            return True
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".egg"):
                return True
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as file:
                    if header in file.read():
                        return True
            except OSError:
                continue
    return False


def plugin_search_path(path: list[str] | None = None) -> list[str]:
    """``sys.path`` without the current folder: ``""``, relative entries and the working
    directory itself are dropped (TRUST-2).

    A notebook's kernel runs in the notebook's folder, and IPython puts that folder on
    ``sys.path``: a cloned repository holding ``x.dist-info/entry_points.txt`` with a
    ``[crystal_kernel.plugins]`` section would otherwise be loaded as a plugin, code run
    before the person trusted anything. Plugins are installed packages, never files of
    the folder Crystal was opened in."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:
        here = None
    kept = []
    for entry in sys.path if path is None else path:
        if not entry or not os.path.isabs(entry):
            continue
        if here is not None and os.path.realpath(entry) == here:
            continue
        kept.append(entry)
    return kept


def plugin_entry_points(group: str = ENTRY_POINT_GROUP) -> list[EntryPoint]:
    """The entry points of ``group`` that installed distributions declare, found on
    :func:`plugin_search_path` only (first distribution of a name wins, as
    ``importlib.metadata.entry_points`` does)."""
    if not declares_entry_points(group):
        return []
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for dist in distributions(path=plugin_search_path()):
        name = (dist.metadata["Name"] or "").lower().replace("_", "-") if dist.metadata else ""
        if name in seen:
            continue
        seen.add(name)
        found.extend(ep for ep in dist.entry_points if ep.group == group)
    return found


def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading entry points once."""
    global _manager
    if _manager is None:
        manager = pluggy.PluginManager(PROJECT)
        manager.add_hookspecs(CrystalHookSpecs)
        for ep in plugin_entry_points():
            try:
                manager.register(ep.load(), name=ep.name)
            except Exception as exc:  # a broken plugin must not take the host down
                _load_notes.append(f"Plugin '{ep.name}' could not be loaded: {exc}")
        _manager = manager
    return _manager


def register_builtin(module: Any, name: str) -> None:
    """Register one of Crystal's own parts (a module of ``@hookimpl`` functions) once;
    registering it again (after :func:`reset_plugin_manager`) is a no-op."""
    manager = plugin_manager()
    if manager.get_plugin(BUILTIN_PREFIX + name) is None:
        manager.register(module, name=BUILTIN_PREFIX + name)


def third_party_plugins() -> list[tuple[str, Any]]:
    """The ``(name, plugin)`` pairs loaded from entry points or registered by a caller,
    without Crystal's own parts."""
    return [(n, p) for n, p in plugin_manager().list_name_plugin() if not str(n).startswith(BUILTIN_PREFIX)]


def load_notes() -> list[str]:
    """English notes about plugins that could not be loaded (empty when all loaded)."""
    plugin_manager()
    return list(_load_notes)


def call_each(hook_name: str, notes: list[str] | None = None, /, **kwargs: Any) -> list[tuple[str, Any]]:
    """Call every plugin's implementation of ``hook_name`` on its own, in load order
    (first registered first), and return ``(plugin name, answer)`` pairs, None answers
    dropped. A plugin that raises is skipped with an English note appended to ``notes``
    and the other plugins still answer: one broken plugin never takes the session down.

    Use this instead of ``plugin_manager().hook.NAME(...)``, which stops at the first
    exception and calls the last registered plugin first."""
    hook = getattr(plugin_manager().hook, hook_name)
    answers: list[tuple[str, Any]] = []
    for impl in hook.get_hookimpls():
        if impl.wrapper or impl.hookwrapper:
            continue
        try:
            result = impl.function(*(kwargs[name] for name in impl.argnames))
        except Exception as exc:  # a plugin's bug is reported, never raised
            if notes is not None:
                notes.append(f"Plugin '{impl.plugin_name}' failed in {hook_name}: {type(exc).__name__}: {exc}")
            continue
        if result is not None:
            answers.append((impl.plugin_name, result))
    return answers


def reset_plugin_manager() -> None:
    """For tests: forget loaded plugins."""
    global _manager
    _manager = None
    _load_notes.clear()
