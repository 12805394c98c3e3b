"""Nothing outside ``crystal_kernel/host/`` writes a session attribute:
the fronts, the MCP layer and the tools change a session only through a host operation
(a method of the session or a function in ``host``), so every rule about a session's
state (refused while a turn runs, the system text and catalog refreshed, the owner
closing what it opened) is written once, in the host. An AST walk over the package
finds ``session.<attr> = ...``, ``<x>.session.<attr> = ...`` and writes to a session's
parts (``session.config.<attr> = ...``), augmented and unpacking assignments,
``setattr(session, ...)`` and ``del session.<attr>`` included."""

from __future__ import annotations

import ast
from pathlib import Path

import crystal_kernel

PACKAGE = Path(crystal_kernel.__file__).resolve().parent


def _names_a_session(node: ast.expr) -> bool:
    """``session``, ``child_session``, ``self.session``, ``entry.session``: the object a
    session attribute hangs on."""
    if isinstance(node, ast.Name):
        return node.id == "session" or node.id.endswith("_session")
    if isinstance(node, ast.Attribute):
        return node.attr == "session" or node.attr.endswith("_session")
    return False


def _rooted_in_a_session(node: ast.expr) -> bool:
    """``session`` itself or one of its parts (``session.config``, ``self.session.access``):
    a write to a part's attribute changes the session as much."""
    while True:
        if _names_a_session(node):
            return True
        if not isinstance(node, ast.Attribute):
            return False
        node = node.value


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
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        for target in (leaf for t in _targets(node) for leaf in _flatten(t)):
            if isinstance(target, ast.Attribute) and _rooted_in_a_session(target.value):
                found.append(f"{filename}:{node.lineno}: {ast.unparse(target)}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
                and node.args and _names_a_session(node.args[0])):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


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


def test_reads_and_method_calls_are_not_writes():
    source = "x = session.mode\nsession.set_mode('plan')\nsession.todos.append(t)\nother.mode = 'plan'\n"
    assert session_writes(source) == []
