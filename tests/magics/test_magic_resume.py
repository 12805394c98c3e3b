"""A bare ``/resume`` in a notebook with the ``%crystal`` magics means this notebook's
session, never another notebook's (SPEC §13 "Notebook identity"), and ``/sessions``
names sessions by notebook and topic (the first prompt while topic naming is off), with
their ids. Real ipykernels under jupyter_client, two notebooks in one workspace.
"""

from __future__ import annotations

import time

from tests.magics.conftest import start_python_kernel


def user_texts(body) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], str)]


def session_ids(workspace) -> set[str]:
    return {p.stem for p in (workspace / ".crystal" / "sessions").glob("*.jsonl")}


def test_bare_resume_after_a_restart_continues_this_notebooks_session(magic_server, tmp_path):
    magic_server.clear()
    a = start_python_kernel(tmp_path, magic_server)  # analysis.ipynb
    b = None
    try:
        magic_server.add({"text": "Noted: zebra."})
        assert a.run("%crystal Remember the word zebra.").status == "ok"
        (a_session,) = session_ids(a.workspace)

        # Another notebook in the same workspace works later: its session is the workspace's newest.
        b = start_python_kernel(tmp_path, magic_server, home=a.home, workspace=a.workspace,
                                notebook=str(a.workspace / "other.ipynb"))
        time.sleep(1.1)  # a newer 'updated' second for the other session
        magic_server.add({"text": "Hello from the other notebook."})
        assert b.run("%crystal This is the other notebook.").status == "ok"
        (b_session,) = session_ids(a.workspace) - {a_session}

        a.km.restart_kernel(now=False)
        a.driver.kc.wait_for_ready(timeout=60)
        assert a.run("%load_ext crystal_kernel").status == "ok"
        run = a.run("%crystal /resume")
        assert run.status == "ok", run.texts()
        text = "\n".join(run.texts())
        assert f"Resumed session {a_session} (2 messages)." in text, text
        assert b_session not in text and "another Crystal front" not in text

        magic_server.add({"text": "It was zebra."})
        assert a.run("%crystal Which word was it?").status == "ok"
        assert user_texts(magic_server.bodies("chat")[-1]) == ["Remember the word zebra.", "Which word was it?"]

        # Again: the notebook's session is the one in use now; the other one is not picked.
        text = "\n".join(a.run("%crystal /resume").texts())
        assert f"This notebook's session is “Remember the word zebra.” ({a_session}), the one in use" in text, text

        # /sessions: each session by its notebook and its first prompt (topic naming is
        # off here), the id after them; the current one starred.
        lines = a.run("%crystal /sessions").texts()[0].splitlines()
        assert any(line.startswith(f"* analysis.ipynb · “Remember the word zebra.”  ({a_session})")
                   for line in lines), lines
        assert any(line.startswith(f"  other.ipynb · “This is the other notebook.”  ({b_session})")
                   for line in lines), lines
    finally:
        a.stop()
        if b is not None:
            b.stop()


def test_bare_resume_in_a_notebook_that_never_had_a_session_never_takes_another(magic_server, tmp_path):
    magic_server.clear()
    other = start_python_kernel(tmp_path, magic_server, notebook=str(tmp_path / "ws" / "other.ipynb"))
    fresh = None
    try:
        magic_server.add({"text": "Other."})
        assert other.run("%crystal Work in the other notebook.").status == "ok"
        (other_session,) = session_ids(other.workspace)
        fresh = start_python_kernel(tmp_path, magic_server, home=other.home, workspace=other.workspace,
                                    notebook=str(other.workspace / "fresh.ipynb"))
        run = fresh.run("%crystal /resume")
        text = "\n".join(run.texts())
        assert run.status == "ok", text
        assert other_session not in text.replace("/sessions", "")
        assert "This notebook's session is " in text and "the one in use" in text
        magic_server.add({"text": "Fresh."})
        assert fresh.run("%crystal Hello").status == "ok"
        assert user_texts(magic_server.bodies("chat")[-1]) == ["Hello"]
    finally:
        other.stop()
        if fresh is not None:
            fresh.stop()
