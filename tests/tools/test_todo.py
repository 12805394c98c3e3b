"""todowrite / todoread: the session's list, replaced in place (MODE-5)."""

from __future__ import annotations

from crystal_kernel.core.todos import Todo
from crystal_kernel.tools import todo as todo_module
from tests.tools.conftest import call


async def test_write_then_read(ctx, session):
    todos = session.todos
    result = await call("todowrite", ctx, todos=[
        {"content": "Write tests", "status": "completed"},
        {"content": "Fix the bug", "status": "in_progress"},
        {"content": "Update docs", "status": "pending"},
    ])
    assert result.ok
    expected = ("[x] Write tests\n[>] Fix the bug\n[ ] Update docs\n"
                "(3 todos: 1 completed, 1 in progress, 1 pending)")
    assert result.text == expected
    assert session.todos is todos  # replaced in place
    assert session.todos == [Todo(content="Write tests", status="completed"),
                                 Todo(content="Fix the bug", status="in_progress"),
                                 Todo(content="Update docs", status="pending")]
    assert (await call("todoread", ctx)).text == expected


async def test_list_survives_mode_switch(ctx, session):
    await call("todowrite", ctx, todos=[{"content": "Plan step", "status": "pending"}])
    session.set_mode("plan")
    assert "[ ] Plan step" in (await call("todoread", ctx)).text


async def test_empty_list(ctx, session):
    assert (await call("todoread", ctx)).text == "The todo list is empty."
    await call("todowrite", ctx, todos=[{"content": "x", "status": "pending"}])
    assert (await call("todowrite", ctx, todos=[])).text == "The todo list is empty."
    assert session.todos == []


async def test_refusals_change_nothing(ctx, session, monkeypatch):
    await call("todowrite", ctx, todos=[{"content": "keep", "status": "pending"}])
    bad = [
        {"todos": [{"content": "x", "status": "done"}]},
        {"todos": [{"content": "   ", "status": "pending"}]},
        {"todos": [{"content": "x" * 3000, "status": "pending"}]},
        {"todos": [{"content": "x", "status": "pending", "extra": 1}]},
        {},
    ]
    for arguments in bad:
        result = await call("todowrite", ctx, **arguments)
        assert not result.ok, arguments
    monkeypatch.setattr(todo_module, "MAX_TODOS", 2)
    result = await call("todowrite", ctx, todos=[{"content": str(i), "status": "pending"} for i in range(3)])
    assert not result.ok and "at most 2" in result.text
    assert [t.content for t in session.todos] == ["keep"]
