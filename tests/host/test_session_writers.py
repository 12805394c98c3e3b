"""Nothing outside ``crystal_kernel/host/`` writes a session attribute:
the fronts, the MCP layer and the tools change a session only through a host operation
(a method of the session or a function in ``host``), so every rule about a session's
state (refused while a turn runs, the system text and catalog refreshed, the owner
closing what it opened) is written once, in the host. An AST walk over the package
finds ``session.<attr> = ...``, ``<x>.session.<attr> = ...`` and writes to a session's
parts (``session.config.<attr> = ...``), augmented and unpacking assignments,
``setattr(session, ...)`` and ``del session.<attr>`` included. A session's containers
count too: an item written (``session.todos[:] = ...``) or a mutating method called
(``session.todos.append(t)``), directly, through a tool's context (``ctx.todos``, the
session's parts a tool is handed) or through an alias (``offered = session.trust_offered``
then ``offered.add(key)``)."""

from __future__ import annotations

import ast
from pathlib import Path

import crystal_kernel

PACKAGE = Path(crystal_kernel.__file__).resolve().parent


# Methods that change a list, set or dict in place.
MUTATORS = frozenset({"append", "extend", "insert", "add", "update", "discard", "remove", "pop", "popitem",
                      "clear", "setdefault", "sort", "reverse", "__setitem__", "__delitem__"})


# What a session or a tool's context hands over without owning it: the notebook's IPython
# shell and the person's side of the conversation; writing to them writes no session state.
NOT_THE_SESSIONS = frozenset({"notebook_shell", "interaction"})


def _names_a_session(node: ast.expr, aliases: frozenset[str] = frozenset()) -> bool:
    """``session``, ``child_session``, ``self.session``, ``entry.session``: the object a
    session attribute hangs on; ``ctx``, a tool's context, holds the session's parts;
    ``aliases``: names bound to one of those parts."""
    if isinstance(node, ast.Name):
        return node.id in ("session", "ctx") or node.id.endswith("_session") or node.id in aliases
    if isinstance(node, ast.Attribute):
        return node.attr == "session" or node.attr.endswith("_session")
    return False


def _rooted_in_a_session(node: ast.expr, aliases: frozenset[str] = frozenset()) -> bool:
    """``session`` itself or one of its parts (``session.config``, ``self.session.access``,
    ``session.todos[0]``): a write to a part changes the session as much."""
    while True:
        if _names_a_session(node, aliases):
            return True
        if not isinstance(node, (ast.Attribute, ast.Subscript)):
            return False
        if isinstance(node, ast.Attribute) and node.attr in NOT_THE_SESSIONS:
            return False
        node = node.value


def _a_part(node: ast.expr, aliases: frozenset[str]) -> bool:
    """An expression naming a session's part (not the session itself): what an alias binds."""
    if isinstance(node, ast.Name):
        return node.id in aliases
    return isinstance(node, (ast.Attribute, ast.Subscript)) and _rooted_in_a_session(node, aliases)


def _aliases(tree: ast.AST) -> frozenset[str]:
    """Names bound to a session's part anywhere in the module (``offered =
    session.trust_offered``, ``for todo in session.todos``), until no more are found."""
    found: frozenset[str] = frozenset()
    while True:
        more = set(found)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and _a_part(node.value, found):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                more.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.For, ast.AsyncFor)) and _rooted_in_a_session(node.iter, found):
                more.update(t.id for t in _flatten(node.target) if isinstance(t, ast.Name))
            elif isinstance(node, ast.NamedExpr) and _a_part(node.value, found):
                more.add(node.target.id)
        if more == found:
            return found
        found = frozenset(more)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    if isinstance(node, ast.Delete):
        return list(node.targets)
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in node.items if i.optional_vars is not None]
    return []


def _flatten(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [leaf for elt in target.elts for leaf in _flatten(elt)]
    if isinstance(target, ast.Starred):
        return _flatten(target.value)
    return [target]


def session_writes(source: str, filename: str = "<source>") -> list[str]:
    """``file:line: text`` of every session attribute write in ``source``."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source, filename)
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        for target in (leaf for t in _targets(node) for leaf in _flatten(t)):
            if isinstance(target, (ast.Attribute, ast.Subscript)) and _rooted_in_a_session(target.value, aliases):
                found.append((node.lineno, ast.unparse(target)))
        if not isinstance(node, ast.Call):
            continue
        if (isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                and node.args and _rooted_in_a_session(node.args[0], aliases)):
            found.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
                and _a_part(node.func.value, aliases)):
            found.append((node.lineno, ast.unparse(node)))
    return [f"{filename}:{line}: {text}" for line, text in sorted(found)]


def test_no_session_attribute_is_assigned_outside_host():
    """No ``session.<attr> =`` outside ``crystal_kernel/host/``."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "host":
            continue
        found += session_writes(path.read_text(encoding="utf-8"), str(relative))
    assert found == [], "session attributes written outside crystal_kernel/host/:\n" + "\n".join(found)


def test_the_walk_finds_each_kind_of_write():
    """The guard is real: each way of writing a session attribute is found."""
    source = (
        "session.mcp_servers = m\n"
        "self.session.flags = f\n"
        "session.provider, session.reviewer = p, None\n"
        "entry.session.turns += 1\n"
        "setattr(session, 'mode', 'work')\n"
        "del child_session.topic\n"
        "session.config.reasoning_effort = 'high'\n"
    )
    assert len(session_writes(source)) == 8


def test_the_walk_finds_writes_to_a_sessions_containers_and_through_aliases():
    """Item writes and mutating calls on a session's part, through a tool's context and
    through a name bound to the part, are writes too (the two this guard once missed:
    ``offered = session.trust_offered; offered.add(key)`` and ``ctx.todos[:] = new``)."""
    source = (
        "session.todos.append(t)\n"
        "session.todos[:] = new\n"
        "ctx.todos[:] = new\n"
        "ctx.config.mode = 'work'\n"
        "offered = session.trust_offered\n"
        "offered.add(key)\n"
        "seen = offered\n"
        "seen.clear()\n"
        "for todo in self.session.todos:\n"
        "    todo.status = 'completed'\n"
        "session.usage.by_model['m'] = row\n"
        "setattr(ctx.config, 'mode', 'plan')\n"
    )
    found = session_writes(source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "session.todos.append(t)", "session.todos[:]", "ctx.todos[:]", "ctx.config.mode", "offered.add(key)",
        "seen.clear()", "todo.status", "session.usage.by_model['m']", "setattr(ctx.config, 'mode', 'plan')",
    ]


def test_reads_and_method_calls_are_not_writes():
    source = ("x = session.mode\nsession.set_mode('plan')\ntodos = list(session.todos)\ntodos.append(t)\n"
              "other.mode = 'plan'\nctx.progress(1, None, 'x')\nlines = session.history[-3:]\nrows = []\n"
              "rows.append(session.mode)\nshell = ctx.notebook_shell\nshell.user_ns['x'] = 1\n"
              "ctx.interaction.answers.append(a)\n")
    assert session_writes(source) == []
