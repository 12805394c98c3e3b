"""POST completion (NB-2): an inline completion through Crystal's provider layer on the
server, against the loopback model server: streamed pieces, the context the model
receives, the off switch, a bad model or setting as one clear line, and the model
request cancelled when the page closes the connection."""

from __future__ import annotations

import asyncio
import json

import pytest

from crystal_kernel.testing.llm_server import LLMServer


@pytest.fixture
def model_server():
    with LLMServer(max_hang=15) as server:
        yield server


@pytest.fixture
def settings(private_home, model_server, monkeypatch):
    """config.json of the person's Home, pointing at the loopback model server."""
    monkeypatch.setenv("CRYSTAL_TEST_MODEL_KEY", "sk-loopback")

    def write(**extra):
        config = {"provider": "openai", "model": "big-model", "baseUrl": model_server.base_url,
                  "apiKeyEnv": "CRYSTAL_TEST_MODEL_KEY", **extra}
        (private_home / "config.json").write_text(json.dumps(config))

    write()
    return write


def lines(data):
    """The JSON lines of a streamed reply (the api fixture gives back the raw text)."""
    assert isinstance(data, str), data
    return [json.loads(line) for line in data.splitlines() if line.strip()]


BODY = {"prefix": "import pandas as pd\ndf = pd.read_csv('sales.csv')\ntotal = df[",
        "suffix": "\nprint(total)", "language": "python",
        "cellsAbove": ["rates = {'EUR': 1.1}", "def to_usd(x):\n    return x * rates['EUR']"],
        "variables": "rates: dict = {'EUR': 1.1}"}


def test_nb2_streams_the_completion_from_the_completion_model(api, settings, model_server):
    settings(completionModel="small-model")
    model_server.add({"text": "```python\n'amount'].sum()\n```", "chunk": 3})
    status, data = api("POST", "completion", body=BODY)
    assert status == 200, data
    replies = lines(data)
    assert replies[-1] == {"done": True}
    text = "".join(r.get("text", "") for r in replies)
    assert text == "'amount'].sum()"  # the fence the model added is gone
    assert len([r for r in replies if "text" in r]) > 1  # streamed in pieces, not whole
    (body,) = model_server.bodies("chat")
    assert body["model"] == "small-model" and body["stream"] is True
    assert not body.get("tools")
    sent = body["messages"][-1]["content"]
    sent = sent if isinstance(sent, str) else "".join(p.get("text", "") for p in sent)
    assert "total = df[<cursor/>\nprint(total)" in sent  # prefix and suffix around the cursor
    assert "def to_usd(x):" in sent and "rates = {'EUR': 1.1}" in sent  # the cells above
    assert "rates: dict = {'EUR': 1.1}" in sent  # the kernel's variables


def test_nb2_without_completion_model_the_session_model_answers(api, settings, model_server):
    model_server.add({"text": "x + 1"})
    status, data = api("POST", "completion", body={"prefix": "y = "})
    assert status == 200 and "".join(r.get("text", "") for r in lines(data)) == "x + 1"
    assert model_server.bodies("chat")[0]["model"] == "big-model"


def test_nb2_off_switch_sends_nothing_to_the_model(api, settings, model_server):
    settings(inlineCompletion="off")
    model_server.add({"text": "never"})
    status, data = api("POST", "completion", body=BODY)
    assert status == 200 and set(data) == {"off"} and "inlineCompletion" in data["off"]
    assert model_server.bodies() == [] and model_server.pending == 1


def test_nb2_replay_provider_makes_no_completions(api, private_home):
    status, data = api("POST", "completion", body=BODY)
    assert status == 200 and "replay" in data["off"]


def test_nb2_bad_model_is_one_clear_line(api, settings, model_server):
    settings(completionModel="no-such-model")
    model_server.add({"status": 404, "message": "model 'no-such-model' not found"})
    status, data = api("POST", "completion", body=BODY)
    assert status == 400
    assert data["error"].startswith("The completion model failed:") and "\n" not in data["error"]
    assert "no-such-model" in data["error"]


@pytest.mark.parametrize("extra, words", [
    ({"inlineCompletion": "sometimes"}, "'inlineCompletion' must be \"on\" or \"off\""),
    ({"completionModel": ""}, "'completionModel' must be a non-empty string"),
])
def test_nb2_bad_setting_is_one_line_and_sends_nothing(api, settings, model_server, extra, words):
    settings(**extra)
    status, data = api("POST", "completion", body=BODY)
    assert status == 400 and words in data["error"] and "\n" not in data["error"]
    assert model_server.bodies() == []


@pytest.mark.parametrize("body, words", [
    ({"suffix": "x"}, "no 'prefix'"),
    ({"prefix": 3}, "'prefix' in the completion request must be a string"),
    ({"prefix": "a", "cellsAbove": "x = 1"}, "'cellsAbove'"),
    ({"prefix": "a", "apiKey": "sk-1"}, "Unknown field 'apiKey'"),
    ("[1]", "must be a JSON object"),
])
def test_nb2_bad_request_is_400(api, settings, model_server, body, words):
    status, data = api("POST", "completion", body=body)
    assert status == 400 and words in data["error"]
    assert model_server.bodies() == []


def test_nb2_closing_the_request_cancels_the_model_request(
        settings, model_server, http_server_client, jp_http_port, jp_base_url, jp_auth_header, jp_asyncio_loop):
    """The page aborts the fetch at the next keystroke: the server stops the model's
    stream (the loopback server sees its client go away) instead of letting it run.
    (``http_server_client`` starts the server's listening socket.)"""
    # Two events (the role, then "def"), then the model server hangs mid-answer.
    model_server.add({"text": "def slow_answer():\n    pass", "chunk": 3, "hang": 15, "hang_after": 2})
    payload = json.dumps({"prefix": "x = "}).encode()
    path = f"{jp_base_url}crystal/api/completion"

    async def start_and_abort():
        reader, writer = await asyncio.open_connection("127.0.0.1", jp_http_port)
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{jp_http_port}\r\n"
                f"Authorization: {jp_auth_header['Authorization']}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\n\r\n")
        writer.write(head.encode() + payload)
        await writer.drain()
        received = b""
        while b'"text"' not in received:  # the first piece arrived: the answer is streaming
            chunk = await asyncio.wait_for(reader.read(4096), 15)
            assert chunk, received
            received += chunk
        writer.close()
        await writer.wait_closed()
        return received

    received = jp_asyncio_loop.run_until_complete(start_and_abort())
    assert b" 200 " in received.split(b"\r\n")[0] and b'{"text": "def"}' in received

    async def wait_for_disconnect():
        return await asyncio.get_running_loop().run_in_executor(None, model_server.wait_for_disconnect, 1, 10)

    assert jp_asyncio_loop.run_until_complete(wait_for_disconnect()), "the model request went on"


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_nb2_a_fence_split_across_pieces_never_reaches_the_ghost_text(api, settings, model_server, chunk):
    """Ghost text cannot take back what it showed: no backtick of a fence the model wrote
    (in pieces of any size) is ever sent, and the explanation after it is dropped."""
    model_server.add({"text": "```py\nx = [i for i in range(3)]\n```\nThis makes a list.", "chunk": chunk})
    status, data = api("POST", "completion", body={"prefix": "x = "})
    assert status == 200
    pieces = [r["text"] for r in lines(data) if "text" in r]
    assert "".join(pieces) == "x = [i for i in range(3)]"
    assert not any("`" in p for p in pieces)


@pytest.mark.parametrize("authorization", ["", "token wrong-token"])
def test_nb2_a_request_without_the_persons_token_is_403_and_sends_nothing(api, settings, model_server,
                                                                          authorization):
    model_server.add({"text": "never"})
    status, data = api("POST", "completion", body={"prefix": "x = "}, headers={"Authorization": authorization})
    assert status == 403 and "error" in data
    assert model_server.bodies() == []


def test_nb2_a_python_cell_of_a_crystal_notebook_is_completed_as_python(api, settings, model_server):
    """A Crystal notebook's cells are Markdown prompts, but a %%python cell (NB-1) is the
    person's Python: the model is asked for Python."""
    model_server.add({"text": "df.head()"})
    status, data = api("POST", "completion", body={"prefix": "%%python\nimport pandas as pd\nprint(",
                                                   "language": "markdown"})
    assert status == 200
    sent = model_server.bodies("chat")[0]["messages"][-1]["content"]
    assert "Complete this python code at <cursor/>" in str(sent)
