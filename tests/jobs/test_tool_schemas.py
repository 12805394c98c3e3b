"""The background tools' schemas are a contract with the model (MODE-2): argument
names, a pinned snapshot of the JSON schema and description each provider is sent.
Regenerate after a deliberate change with:
    CRYSTAL_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/jobs/test_tool_schemas.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from crystal_kernel.tools.catalog import WORK_ORDER, load_builtin

SNAPSHOT = Path(__file__).parent / "snapshots" / "background_schemas.json"
ARGUMENTS = {
    "bash_start": ["command"],
    "bash_status": ["job_id", "wait_seconds"],
    "bash_logs": ["job_id", "offset", "limit"],
    "bash_stop": ["job_id"],
}


def current() -> dict:
    return {name: {"description": load_builtin(name).description, "input_schema": load_builtin(name).input_schema()}
            for name in ARGUMENTS}


def test_schemas_match_snapshot():
    data = current()
    if os.environ.get("CRYSTAL_UPDATE_SNAPSHOTS") or not SNAPSHOT.exists():
        SNAPSHOT.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
    assert json.loads(SNAPSHOT.read_text()) == json.loads(json.dumps(data))


def test_argument_names_order_and_descriptions():
    assert [n for n in WORK_ORDER if n.startswith("bash_")] == list(ARGUMENTS)
    for name, arguments in ARGUMENTS.items():
        tool = load_builtin(name)
        schema = tool.input_schema()
        assert list(schema["properties"]) == arguments, name
        assert "additionalProperties" not in schema, name  # the input model refuses unknown ones
        text = json.dumps(schema)
        assert "$ref" not in text and '"title"' not in text, name
        assert len(tool.description) > 150, name
        for prop, spec in schema["properties"].items():
            assert spec.get("description"), f"{name}.{prop}"
