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

Built-in parts register through the same hooks a plugin would. A plugin that raises is
reported as a note and never takes the session down.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any, Callable

import pluggy

PROJECT = "crystal_kernel"
ENTRY_POINT_GROUP = "crystal_kernel.plugins"

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


_manager: pluggy.PluginManager | None = None
_load_notes: list[str] = []


def plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager, loading entry points once."""
    global _manager
    if _manager is None:
        manager = pluggy.PluginManager(PROJECT)
        manager.add_hookspecs(CrystalHookSpecs)
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                manager.register(ep.load(), name=ep.name)
            except Exception as exc:  # a broken plugin must not take the host down
                _load_notes.append(f"Plugin '{ep.name}' could not be loaded: {exc}")
        _manager = manager
    return _manager


def load_notes() -> list[str]:
    plugin_manager()
    return list(_load_notes)


def reset_plugin_manager() -> None:
    """For tests: forget loaded plugins."""
    global _manager
    _manager = None
    _load_notes.clear()
