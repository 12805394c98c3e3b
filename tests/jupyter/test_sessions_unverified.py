"""TRUST-7 in a notebook: ``/sessions`` marks a planted (unsigned) session
``(unverified)``, as the terminal does. The real kernel under jupyter_client."""

from __future__ import annotations

import shutil


def plant(workspace, like: str, new_id: str) -> None:
    """A journal renamed to another id: its signature does not verify (TRUST-7)."""
    sessions = workspace / ".crystal" / "sessions"
    shutil.copy2(sessions / f"{like}.jsonl", sessions / f"{new_id}.jsonl")


def test_trust7_slash_sessions_in_a_notebook_marks_a_planted_session_unverified(kernel):
    kernel.server.add({"text": "Hello."})
    assert kernel.run("Say hello").status == "ok"
    own = kernel.driver.kc.kernel_info(reply=True)["content"]["crystal"]["session"]
    planted = "20990101-000000-planted"
    plant(kernel.workspace, own, planted)
    run = kernel.run("/sessions")
    assert run.status == "ok", run.texts()
    text = "\n".join(run.texts())
    line = next(row for row in text.splitlines() if planted in row)
    assert "(unverified)" in line, text
    assert "(unverified)" not in next(row for row in text.splitlines() if own in row), text


def test_trust7_the_sidebar_comm_says_which_sessions_this_kernels_home_signed(kernel):
    """The sidebar's list over the kernel's comm (a kernel behind a gateway) carries
    ``signed`` from the kernel's own Home: the planted copy is not, its own session is."""
    from tests.jupyter.test_sidebar_comm import ask, open_sidebar

    kernel.server.add({"text": "Hi."})
    assert kernel.run("Say hi").status == "ok"
    own = kernel.driver.kc.kernel_info(reply=True)["content"]["crystal"]["session"]
    planted = "20990101-000000-planted2"
    plant(kernel.workspace, own, planted)
    (reply,) = ask(kernel, open_sidebar(kernel), {"op": "sessions", "args": {}})
    assert reply["ok"], reply
    signed = {row["id"]: row["signed"] for row in reply["data"]["sessions"]}
    assert signed[own] is True and signed[planted] is False, signed
