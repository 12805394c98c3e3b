"""``crystal promptsets …``, ``crystal prompt-attachments …`` and ``crystal prompts
export …`` (SPEC §11, PS-9, PA-9). Registered by :func:`add_subparsers` into the main
``crystal`` parser; handlers raise UserError for bad input (one line, exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crystal_kernel.cli.terminal import say, say_json
from crystal_kernel.core.errors import UserError
from crystal_kernel.core.paths import home_dir
from crystal_kernel.prompts.names import NAMED_PROMPTS

SOURCES = {"home": "home", "project": "workspace"}


def add_subparsers(subparsers: Any) -> None:
    """Register ``promptsets``, ``prompt-attachments`` and ``prompts`` on ``subparsers``."""
    _add_promptsets(subparsers)
    _add_attachments(subparsers)
    _add_prompts(subparsers)


def _common(parser: argparse.ArgumentParser, *, workspace: bool = False) -> None:
    parser.add_argument("--home", metavar="DIR", help="Crystal home (default $CRYSTAL_HOME or ~/.crystal)")
    if workspace:
        parser.add_argument("--workspace", metavar="DIR", default=".", help="workspace root (default .)")
        parser.add_argument("--source", choices=tuple(SOURCES), help="only the Home or the project folders")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")


def _add_promptsets(subparsers: Any) -> None:
    top = subparsers.add_parser("promptsets", help="list, show, enable or disable prompt sets (Home only)")
    actions = top.add_subparsers(dest="promptsets_action", required=True)
    for name, help_text, arg in (
        ("list", "list the prompt sets", None),
        ("show", "show one prompt set", "NAME"),
        ("enable", "enable one set (and disable every other)", "NAME"),
        ("disable", "disable the enabled set (back to the built-in prompts)", "NAME?"),
    ):
        parser = actions.add_parser(name, help=help_text)
        if arg == "NAME":
            parser.add_argument("name", help="the prompt set's folder name under ~/.crystal/promptsets")
        elif arg == "NAME?":
            parser.add_argument("name", nargs="?", help="the set to disable (default: the enabled one)")
        _common(parser)
        parser.set_defaults(handler=cmd_promptsets)


def _add_attachments(subparsers: Any) -> None:
    top = subparsers.add_parser("prompt-attachments", help="list, show, enable, disable or reorder prompt attachments")
    actions = top.add_subparsers(dest="attachments_action", required=True)
    for name in ("list", "show", "enable", "disable", "up", "down"):
        parser = actions.add_parser(name, help=f"{name} prompt attachments" if name == "list" else f"{name} one attachment")
        if name != "list":
            parser.add_argument("name", help="the attachment's folder name")
        _common(parser, workspace=True)
        parser.set_defaults(handler=cmd_attachments)


def _add_prompts(subparsers: Any) -> None:
    from crystal_kernel.host.flags import add_model_flags, add_process_flags

    top = subparsers.add_parser("prompts", help="named prompts")
    actions = top.add_subparsers(dest="prompts_action", required=True)
    export = actions.add_parser("export", help="print a fully composed prompt as the model would receive it")
    export.add_argument("name", choices=NAMED_PROMPTS, metavar="NAME", help=" | ".join(NAMED_PROMPTS))
    export.add_argument("--workspace", metavar="DIR", default=".", help="workspace root (default .)")
    export.add_argument("--home", metavar="DIR", help="Crystal home (default $CRYSTAL_HOME or ~/.crystal)")
    add_model_flags(export)
    add_process_flags(export)
    export.set_defaults(handler=cmd_export)


def _home(ns: argparse.Namespace) -> Path:
    if ns.home is None:
        return home_dir()
    home = Path(ns.home).expanduser()
    if not home.is_dir():
        raise UserError(f"--home '{ns.home}' is not a folder.")
    return home


def _workspace(ns: argparse.Namespace) -> Path:
    workspace = Path(ns.workspace).expanduser()
    if not workspace.is_dir():
        raise UserError(f"The workspace '{ns.workspace}' is not a folder.")
    return workspace.resolve()


def _emit(ns: argparse.Namespace, data: Any, text: str) -> int:
    if ns.format == "json":
        say_json(data, indent=2)
    else:
        say(text)
    return 0


def cmd_promptsets(ns: argparse.Namespace) -> int:
    """PS-9: the Home manifests, outside a session."""
    from crystal_kernel.prompts import promptsets, report
    from crystal_kernel.prompts.selection import resolve_selection

    home = _home(ns)
    action = ns.promptsets_action
    if action == "list":
        selection = resolve_selection(home, None, None)
        data = report.sets_data(home, selection)
        return _emit(ns, data, report.sets_text(data))
    if action == "show":
        data = report.set_show_data(promptsets.require_set(home, ns.name))
        return _emit(ns, data, report.set_show_text(data))
    if action == "enable":
        message = promptsets.enable_set(home, ns.name)
    else:
        message = promptsets.disable_sets(home, ns.name)
    return _emit(ns, {"ok": True, "message": message}, message)


def cmd_attachments(ns: argparse.Namespace) -> int:
    """PA-9: the same manifests the session's /promptattach edits."""
    from crystal_kernel.prompts import report
    from crystal_kernel.prompts.attachments import discover_attachments, require_attachment
    from crystal_kernel.prompts.commands import apply_attachment_action
    from crystal_kernel.prompts.selection import resolve_selection

    home, workspace = _home(ns), _workspace(ns)
    source = SOURCES.get(ns.source) if ns.source else None
    selection = resolve_selection(home, workspace, None)
    view = discover_attachments(home, workspace, [], source=source)
    where = f" in the {ns.source} folder" if ns.source else ""
    action = ns.attachments_action
    if action == "list":
        data = report.attachments_data(selection, view if source else None)
        return _emit(ns, data, report.attachments_text(data))
    if action == "show":
        data = report.attachment_show_data(require_attachment(view, ns.name, where), selection)
        return _emit(ns, data, report.attachment_show_text(data))
    require_attachment(view, ns.name, where)
    message = apply_attachment_action(view, action, ns.name)
    return _emit(ns, {"ok": True, "message": message}, message)


# A new session's id is made when it starts; the export shows where it goes.
EXPORT_SESSION_ID = "{{session_id}}"


def cmd_export(ns: argparse.Namespace) -> int:
    """Print the named prompt composed exactly as the model would receive it, from the
    same session context a front builds (skills, instructions, directories, plugins,
    flags); notes go to stderr. Per-call slots (PH-7) and the new session's id stay as
    tokens; the local time is the time of the export."""
    from crystal_kernel.core.config import load_config
    from crystal_kernel.host.bootstrap import SessionOptions, open_session
    from crystal_kernel.host.flags import flags_from_args, overrides_from_args
    from crystal_kernel.prompts.compose import compose_named
    from crystal_kernel.providers.base import NoModel

    home, workspace = _home(ns), _workspace(ns)
    overrides = overrides_from_args(ns)
    config = load_config(home, overrides)  # only to name the provider and model it would use
    session = open_session(SessionOptions(
        workspace, overrides=overrides, home=home, flags=flags_from_args(ns), person_present=False,
        provider=NoModel(config.provider, config.effective_model, why="crystal prompts export sends no request."),
        session_id=EXPORT_SESSION_ID, saves=False))
    text = compose_named(ns.name, session)
    notes = list(dict.fromkeys(session.drain_notes()))
    if EXPORT_SESSION_ID in text:  # a person reading it would take the braces for a fault
        notes.append(f"{EXPORT_SESSION_ID} stands for the session's id, which a session gets when it starts "
                     "(e.g. 20261207-205909-a1b2c3); the rest is the text as the model receives it.")
    for note in notes:
        say(f"note: {note}", err=True)
    say(text, end="")
    return 0
