"""A notebook's session follows the notebook (SPEC §13 "Notebook identity"), in the real
kernel under jupyter_client. The page (the lab extension) keeps the session id in the
notebook's ``metadata.crystal.session_id`` and sends it, with the notebook's path now,
when it opens the ``crystal.live`` comm (on connecting and after each restart); the
kernel names its session in every output's ``metadata.crystal.session``. Here the test
plays the page: it opens that comm with what the extension sends."""

from __future__ import annotations

import time


def session_in_outputs(run) -> str:
    """The session id the kernel's outputs carry for the page to keep."""
    ids = {((m["content"].get("metadata") or {}).get("crystal") or {}).get("session")
           for m in run.messages if m["msg_type"] in ("display_data", "update_display_data")}
    ids.discard(None)
    assert len(ids) == 1, ids
    return ids.pop()


def page_connects(kernel, path: str, session_id: str | None) -> None:
    """What the lab extension sends on connecting to the kernel (forms.ts)."""
    kernel.driver.open_comm("crystal.live", {"streamDeltas": True,
                                             "notebook": {"path": path, "sessionId": session_id}})
    time.sleep(0.5)  # the comm is handled before the next cell (shell messages keep their order)


def restart(kernel) -> None:
    kernel.km.restart_kernel(now=False)  # what the notebook's restart button does
    kernel.driver.kc.wait_for_ready(timeout=60)


def user_texts(body) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def test_renamed_notebook_continues_its_session_after_a_restart(llm_server, tmp_path, kernel_factory):
    """Issue scenario: Untitled.ipynb is renamed A.ipynb on first save, another new
    notebook takes the name Untitled.ipynb and its own session, then A's kernel restarts:
    A's next cell continues A's session (the model gets A's history) and says so in one
    line; a bare /resume in A never picks the other notebook's session."""
    home = kernel_factory.make_home(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    a = kernel_factory.start(home=home, workspace=ws, notebook=str(ws / "Untitled.ipynb"))
    page_connects(a, "Untitled.ipynb", None)
    llm_server.add({"text": "Noted: the word is zebra."})
    run = a.run("Remember the word zebra.")
    assert run.status == "ok"
    a_session = session_in_outputs(run)
    # The page writes it into A's metadata; A is renamed (the kernel keeps its old JPY_SESSION_NAME).

    b = kernel_factory.start(home=home, workspace=ws, notebook=str(ws / "Untitled.ipynb"))
    page_connects(b, "Untitled.ipynb", None)
    llm_server.add({"text": "Hello from B."})
    b_session = session_in_outputs(b.run("This is notebook B."))
    assert b_session != a_session

    restart(a)
    page_connects(a, "A.ipynb", a_session)
    llm_server.add({"text": "The word was zebra."})
    run = a.run("Which word did I ask you to remember?")
    assert run.status == "ok"
    notes = [t for t in run.texts() if "Continuing this notebook's session" in t]
    assert notes == [f"Note: Continuing this notebook's session “Remember the word zebra.” ({a_session}): "
                     "2 messages."], run.texts()
    assert user_texts(llm_server.bodies("chat")[-1])[-2:] == ["Remember the word zebra.",
                                                              "Which word did I ask you to remember?"]
    assert session_in_outputs(run) == a_session

    # A bare /resume in A: A's own session, which it already is; never B's.
    text = "\n".join(a.run("/resume").texts())
    assert b_session not in text and "another Crystal front" not in text
    assert f"This notebook's session is “Remember the word zebra.” ({a_session}), the one in use" in text


def test_a_notebook_naming_a_session_that_is_not_saved_starts_a_new_one(llm_server, tmp_path, kernel_factory):
    """Untrusted metadata: an id that is no saved, signed session of this workspace is
    not continued; one line says so and the turn goes on in a new session."""
    kernel = kernel_factory.start()
    page_connects(kernel, "copied.ipynb", "20260101-000000-nothere")
    llm_server.add({"text": "Fresh start."})
    run = kernel.run("Hello")
    assert run.status == "ok"
    assert any("is not among this workspace's saved sessions; a new session starts" in t for t in run.texts())
    assert session_in_outputs(run) != "20260101-000000-nothere"
    assert user_texts(llm_server.bodies("chat")[-1]) == ["Hello"]


def test_sessions_are_named_by_notebook_and_topic(llm_server, tmp_path, kernel_factory):
    """``/sessions`` in a notebook names each session by the notebook that used it last
    (its name now, after a rename) and its topic — while it has none (topic naming is off
    here), its first prompt, shortened and made safe — with the id after them."""
    kernel = kernel_factory.start()
    page_connects(kernel, "work/Untitled.ipynb", None)
    llm_server.add({"text": "First."})
    first = session_in_outputs(kernel.run("One"))
    restart(kernel)
    page_connects(kernel, "work/sales.ipynb", None)  # renamed, and its metadata has no id yet
    llm_server.add({"text": "Second."})
    second = session_in_outputs(kernel.run("Two\x1b[31m  red\u202e and a very long line that goes on and on, far past sixty "
                                           "characters\nsecond line"))
    assert second != first
    lines = kernel.run("/sessions").texts()[0].splitlines()
    assert f"* work/sales.ipynb · “Two [31m red and a very long line that goes on and on, far…”  ({second})" \
        in "\n".join(lines), lines
    assert f"  work/Untitled.ipynb · “One”  ({first})" in "\n".join(lines), lines
