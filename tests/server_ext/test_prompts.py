"""GET/POST promptsets and attachments: the CLI's functions on real manifests (PS-5, PS-9,
PA-5, PA-9); bad input is a 400 and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys


def make(folder, **manifest):
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text(json.dumps(manifest))
    (folder / "work.md").write_text(f"Work text of {folder.name}\n")
    return folder


def manifest(folder):
    return json.loads((folder / "prompt.json").read_text())


def test_promptsets_list_marks_the_selected_set(api, private_home):
    make(private_home / "promptsets" / "terse", name="Terse", enabled=True)
    make(private_home / "promptsets" / "chatty", description="Talks a lot")
    status, data = api("GET", "promptsets")
    assert status == 200 and data["selected"] == "terse"
    assert {s["name"]: s["enabled"] for s in data["sets"]} == {"chatty": False, "terse": True}


def test_ps5_enable_from_the_api_writes_the_manifests_like_the_cli(api, private_home):
    terse = make(private_home / "promptsets" / "terse", enabled=True, extra={"kept": 1})
    chatty = make(private_home / "promptsets" / "chatty")
    status, data = api("POST", "promptsets", body={"action": "enable", "name": "chatty"})
    assert status == 200 and data["message"] == "Prompt set 'chatty' is enabled."
    assert data["selected"] == "chatty"
    assert manifest(chatty)["enabled"] is True
    assert manifest(terse) == {"enabled": False, "extra": {"kept": 1}}  # unknown field kept
    # The CLI sees the same state.
    out = subprocess.run([sys.executable, "-m", "crystal_kernel.cli", "promptsets", "list", "--format", "json",
                          "--home", str(private_home)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["selected"] == "chatty"


def test_ps5_disable_goes_back_to_default(api, private_home):
    terse = make(private_home / "promptsets" / "terse", enabled=True)
    status, data = api("POST", "promptsets", body={"action": "disable"})
    assert status == 200 and data["selected"] == "default" and manifest(terse)["enabled"] is False


def test_promptsets_bad_input_is_400_and_changes_nothing(api, private_home):
    terse = make(private_home / "promptsets" / "terse", enabled=True)
    before = (terse / "prompt.json").read_text()
    bodies = [
        "not json", "[1, 2]", {"action": "explode", "name": "terse"}, {"action": "enable"},
        {"action": "enable", "name": "../terse"}, {"action": "enable", "name": "missing"},
        {"action": "enable", "name": 7}, {"action": "enable", "name": "terse", "surprise": 1},
    ]
    for body in bodies:
        status, data = api("POST", "promptsets", body=body)
        assert status == 400, body
        assert isinstance(data["error"], str) and "\n" not in data["error"]
    assert (terse / "prompt.json").read_text() == before


def test_corrupt_set_manifest_is_skipped_and_left_untouched(api, private_home):
    folder = private_home / "promptsets" / "broken"
    folder.mkdir(parents=True)
    (folder / "prompt.json").write_text("{oops")
    status, data = api("GET", "promptsets")
    assert status == 200 and data["sets"] == [] and any("broken" in n for n in data["notes"])
    assert api("POST", "promptsets", body={"action": "enable", "name": "broken"})[0] == 400
    assert (folder / "prompt.json").read_text() == "{oops"


def test_attachments_list_merges_home_and_workspace(api, private_home, jp_root_dir):
    make(private_home / "prompt-attachments" / "style", enabled=True, order=0)
    make(jp_root_dir / ".crystal" / "prompt-attachments" / "tests-first")
    status, data = api("GET", "attachments")
    assert status == 200
    rows = {r["name"]: (r["source"], r["enabled"], r["position"]) for r in data["attachments"]}
    assert rows == {"style": ("home", True, 1), "tests-first": ("workspace", False, None)}


def test_pa5_enable_up_down_disable_rewrite_the_order(api, private_home, jp_root_dir):
    a = make(private_home / "prompt-attachments" / "alpha")
    b = make(jp_root_dir / ".crystal" / "prompt-attachments" / "beta")
    assert api("POST", "attachments", body={"action": "enable", "name": "alpha"})[0] == 200
    status, data = api("POST", "attachments", body={"action": "enable", "name": "beta"})
    assert status == 200 and "position 2" in data["message"]
    assert (manifest(a)["order"], manifest(b)["order"]) == (0, 1)
    status, data = api("POST", "attachments", body={"action": "up", "name": "beta"})
    assert status == 200 and [r["name"] for r in data["attachments"] if r["enabled"]] == ["beta", "alpha"]
    assert (manifest(a)["order"], manifest(b)["order"]) == (1, 0)
    assert api("POST", "attachments", body={"action": "down", "name": "beta"})[0] == 200
    assert (manifest(a)["order"], manifest(b)["order"]) == (0, 1)
    status, data = api("POST", "attachments", body={"action": "disable", "name": "alpha"})
    assert status == 200 and manifest(a)["enabled"] is False and manifest(b)["order"] == 1


def test_attachments_source_limits_the_view(api, private_home, jp_root_dir):
    make(private_home / "prompt-attachments" / "alpha")
    status, data = api("POST", "attachments", body={"action": "enable", "name": "alpha", "source": "project"})
    assert status == 400 and "project folder" in data["error"]
    assert api("POST", "attachments", body={"action": "enable", "name": "alpha", "source": "home"})[0] == 200


def test_attachments_bad_input_is_400_and_changes_nothing(api, private_home):
    a = make(private_home / "prompt-attachments" / "alpha", enabled=True, order=0)
    before = (a / "prompt.json").read_text()
    bodies = [
        "{", {"action": "sideways", "name": "alpha"}, {"action": "enable"}, {"action": "up", "name": "alpha"},
        {"action": "enable", "name": "Alpha!"}, {"action": "enable", "name": "alpha", "source": "elsewhere"},
        {"action": "disable", "name": "ghost"},
    ]
    for body in bodies:
        status, data = api("POST", "attachments", body=body)
        assert status == 400, body
        assert data["error"]
    assert (a / "prompt.json").read_text() == before


def test_attachments_workspace_outside_root_is_400(api):
    status, data = api("GET", "attachments", params={"workspace": "../.."})
    assert status == 400 and "outside" in data["error"]
