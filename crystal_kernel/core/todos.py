"""The todo list the model keeps with todo_write and reads with todo_read."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class Todo(BaseModel):
    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
