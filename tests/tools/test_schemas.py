"""Snapshot of every built-in tool's JSON schema, and of the tool as each provider sends
it (Chat Completions function, Responses function, Anthropic input_schema), built from
the ToolSpec. Regenerate after a deliberate change with:
    CRYSTAL_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/tools/test_schemas.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from crystal_kernel.core.tool_types import ToolSpec
from crystal_kernel.providers.base import ModelRequest
from crystal_kernel.providers.openai_chat import chat_tools
from crystal_kernel.tools.base import ToolError
from crystal_kernel.tools.catalog import load_builtin

SNAPSHOT = Path(__file__).parent / "snapshots" / "schemas.json"
# The tools of this package's issue (background and notebook tools pin their own).
TOOLS = ("read", "list", "tree", "glob", "grep", "search", "todowrite", "todoread", "question", "skill",
         "edit", "write", "bash", "view_image", "describe_image", "notebook_edit", "notebook_run")

# Argument names are a contract (SPEC §11, §12).
ARGUMENTS = {
    "read": ["path", "offset", "limit"], "list": ["path"], "tree": ["path", "depth"],
    "glob": ["pattern", "path"], "grep": ["pattern", "path", "glob", "ignore_case", "context"],
    "search": ["query", "limit"], "todowrite": ["todos"], "todoread": [], "question": ["questions"],
    "skill": ["name"], "edit": ["path", "old_string", "new_string", "replace_all"],
    "write": ["path", "content"], "bash": ["command", "timeout_seconds"], "view_image": ["path"],
    "describe_image": ["path", "question"],
    # SPEC §12 notebook tools.
    "notebook_edit": ["path", "action", "cell_id", "index", "source", "cell_type"],
    "notebook_run": ["path", "cell_ids", "timeout_seconds"],
}


def as_sent(spec: ToolSpec) -> dict[str, Any]:
    return {
        "input_schema": spec.input_schema,
        "openai_chat": {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                                         "parameters": spec.input_schema}},
        "openai_responses": {"type": "function", "name": spec.name, "description": spec.description,
                             "parameters": spec.input_schema, "strict": False},
        "anthropic": {"name": spec.name, "description": spec.description, "input_schema": spec.input_schema},
    }


def current() -> dict[str, Any]:
    return {name: as_sent(load_builtin(name).spec()) for name in TOOLS}


def test_schemas_match_snapshot():
    data = current()
    if os.environ.get("CRYSTAL_UPDATE_SNAPSHOTS") or not SNAPSHOT.exists():
        SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
        SNAPSHOT.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    assert json.loads(SNAPSHOT.read_text()) == json.loads(json.dumps(data))


def test_argument_names_are_the_contract():
    for name in TOOLS:
        schema = load_builtin(name).input_schema()
        assert list(schema["properties"]) == ARGUMENTS[name], name
        assert schema["type"] == "object", name


def test_unknown_arguments_are_refused_without_a_closed_schema_on_the_wire():
    """``additionalProperties: false`` is not sent (about 100 tokens a request over the
    catalog, bench/bench_cost.py); the input models still refuse an argument they do not
    know, naming it, as before."""
    for name in TOOLS:
        tool = load_builtin(name)
        assert "additionalProperties" not in json.dumps(tool.input_schema()), name
        arguments = {prop: None for prop in tool.input_schema().get("required", [])}
        with pytest.raises(ToolError, match=r"stray: Extra inputs are not permitted"):
            tool.parse({**arguments, "stray": 1})
    with pytest.raises(ToolError, match=r"todos\.0\.stray: Extra inputs are not permitted"):
        load_builtin("todowrite").parse({"todos": [{"content": "x", "status": "pending", "stray": 1}]})


def test_schemas_are_self_contained_and_described():
    for name in TOOLS:
        tool = load_builtin(name)
        text = json.dumps(tool.input_schema())
        assert "$ref" not in text and "$defs" not in text and '"title"' not in text, name
        # The description is the .md file beside the module: real prose, not the class name.
        assert len(tool.description) > 150 and tool.description != name, name
        for prop, schema in tool.input_schema()["properties"].items():
            assert schema.get("description"), f"{name}.{prop} has no description"


def test_chat_adapter_sends_the_snapshotted_shape():
    specs = [load_builtin(name).spec() for name in TOOLS]
    request = ModelRequest(model="m", system="s", messages=[], tools=specs)
    assert chat_tools(request) == [as_sent(s)["openai_chat"] for s in specs]
