"""How many people one machine carries: Crystal notebooks under a real JupyterHub at once.

The hub is the one tests/hub starts (``running_hub``): ``jupyterhub`` with
``configurable-http-proxy``, real Unix users, the ``LocalProcessSpawner`` and Crystal's
documented ``jupyterhub_config.py`` (docs/deploy.md). Each person has their own server
(run as them) and a Crystal notebook session in it; the bench talks to each kernel the way
JupyterLab does, over the kernel's websocket through the hub's proxy, with the person's
own token. The model is the loopback server, routed per request: a turn's first request
streams a sentence and two tool calls (a sandboxed ``bash`` and a ``glob``), the second
streams the answer, which names the turn (no turn can take another's reply).

Figures (each person: one unmeasured warm-up turn, then TURNS turns back to back, all
people at the same moment):

- time to first streamed token (execute_request sent → the first iopub message carrying
  the model's first words) and time per turn (→ the kernel idle again), p50 and p95, for
  10 and 20 people at once against one person alone doing SOLO_TURNS of the same turns.
  Target: p95 at 10 people ≤ 3x alone;
- RSS of an idle Crystal kernel (its process and the job guard it starts) just after its
  start, against a stock ipykernel started the same way in the same server. Target ≤
  1.3x. Also the Crystal kernels' RSS when idle after their turns;
- the memory of N people (the PSS of every process of their users: servers, kernels,
  their children; PSS, so shared libraries are not counted N times) against one person,
  and the hub's own (hub, proxy, culler);
- lost turns (no answer within TURN_TIMEOUT, or another turn's answer) and errors (an
  error reply or message): target 0.

Needs root (it makes Unix users) and build/hub's proxy (``make hub-deps``); otherwise
the rows are skipped with the reason. ``BENCH_HUB_PEOPLE`` (``10,20``), ``BENCH_HUB_TURNS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from bench._support import row, skipped_row

PEOPLE = [int(n) for n in os.environ.get("BENCH_HUB_PEOPLE", "10,20").split(",")]
TURNS = int(os.environ.get("BENCH_HUB_TURNS", "3"))
SOLO_TURNS = int(os.environ.get("BENCH_HUB_SOLO_TURNS", "12"))
TURN_TIMEOUT = 300.0
#: Unmeasured turns each person does first: a kernel's first turns import the provider's
#: SDK and the tools' modules (0.25 s a turn, then 0.1 s alone).
WARMUP = 3
#: The model's first words in each turn (what "first streamed token" waits for).
FIRST = "Qv7x"
TURN_TAG = re.compile(r"LOADTURN-[0-9a-f]{8}")
LOST = "lost"
#: The paced model of the last rows: each streamed piece (4 characters, about a token)
#: after this many seconds, 50 a second, as a hosted model streams.
PACE = 0.02
PACED_PEOPLE = 10


def router(pace: float) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    """A turn's first request gets words and two tool calls; a request that carries the
    tools' results gets the answer naming the turn's tag (from the person's prompt).
    ``pace``: seconds before each streamed piece (0: at once)."""
    shape: dict[str, Any] = {"chunk": 4, "arg_chunk": 7, "delay": pace} if pace else {"chunk": 8}

    def route(body: dict[str, Any], path: str) -> dict[str, Any]:
        items = body.get("messages") or body.get("input") or [{}]
        last = items[-1] if isinstance(items[-1], dict) else {}
        tags = TURN_TAG.findall(json.dumps(body))
        tag = tags[-1] if tags else "LOADTURN-none"
        if last.get("role") == "tool" or last.get("type") == "function_call_output":
            return {"text": f"All done: the files are there and {tag.replace('LOADTURN', 'DONE')} is complete.",
                    **shape}
        return {"text": f"{FIRST} checking the folder first.", **shape,
                "tool_calls": [{"name": "bash", "arguments": {"command": "echo load-ok && ls | head -3"}},
                               {"name": "glob", "arguments": {"pattern": "*.ipynb"}}]}

    return route


@dataclass
class Turn:
    first_token: float | None = None
    total: float | None = None
    error: str = ""
    detail: str = ""  # what a lost turn showed instead


@dataclass
class Notebook:
    """One person's Crystal notebook: a session in their server and its kernel's websocket."""

    hub: Any
    person: Any
    kernel_id: str = ""
    ws: Any = None
    waiting: dict[str, asyncio.Queue[tuple[float, dict[str, Any]]]] = field(default_factory=dict)
    reader: asyncio.Task[None] | None = None
    failed: str = ""  # why the notebook could not open

    async def open(self, kernel: str = "crystal", path: str = "load.ipynb") -> None:
        status, body = await asyncio.to_thread(
            self.hub.api, "POST", f"user/{self.person.name}/api/sessions", token=self.person.token,
            body={"path": path, "type": "notebook", "name": path, "kernel": {"name": kernel}})
        if status != 201:
            raise RuntimeError(f"{self.person.name}: session not created: {status} {str(body)[:300]}")
        self.kernel_id = body["kernel"]["id"]
        from tornado.websocket import WebSocketClosedError

        for attempt in range(3):
            try:
                await self.connect()
                for _ in range(24):  # a kernel still starting does not answer yet
                    try:
                        if await self.request("kernel_info_request", {}, "shell", 5):
                            return
                    except TimeoutError:
                        pass
                raise RuntimeError(f"{self.person.name}'s {kernel} kernel never answered kernel_info")
            except WebSocketClosedError as exc:
                closed = f"{self.ws.close_code} {self.ws.close_reason}" if self.ws is not None else ""
                said = [line for line in self.hub.log.read_text(errors="replace").splitlines()
                        if self.kernel_id[:8] in line or "rror" in line][-12:]
                print(f"  {self.person.name}: websocket closed while opening ({closed}); again. The hub's log:\n    "
                      + "\n    ".join(said), flush=True)
                await self.close()
                if attempt == 2:
                    raise RuntimeError(f"{self.person.name}'s websocket closed three times: {closed}") from exc

    async def connect(self) -> None:
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import websocket_connect

        url = (self.hub.url.replace("http://", "ws://") + f"user/{self.person.name}/api/kernels/"
               f"{self.kernel_id}/channels?session_id={uuid.uuid4().hex}")
        self.ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {self.person.token}"},
                                                      request_timeout=120), max_message_size=64 * 2**20)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            raw = await self.ws.read_message()
            if raw is None:
                return
            at = time.perf_counter()
            if isinstance(raw, bytes):  # jupyter_server's binary frame: count, offsets, JSON, buffers
                count = int.from_bytes(raw[:4], "big")
                offsets = [int.from_bytes(raw[4 * (i + 1):4 * (i + 2)], "big") for i in range(count)]
                raw = raw[offsets[0]:offsets[1] if count > 1 else None].decode()
            message = json.loads(raw)
            queue = self.waiting.get(message.get("parent_header", {}).get("msg_id", ""))
            if queue is not None:
                queue.put_nowait((at, message))

    async def request(self, msg_type: str, content: dict[str, Any], channel: str, timeout: float) -> bool:
        """Send one message and wait for its reply on the same channel."""
        msg_id = uuid.uuid4().hex
        queue: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        self.waiting[msg_id] = queue
        try:
            await self.ws.write_message(json.dumps(self._message(msg_id, msg_type, content, channel)))
            while True:
                _, message = await asyncio.wait_for(queue.get(), timeout)
                if message.get("channel") == channel and message["msg_type"].endswith("_reply"):
                    return True
        finally:
            self.waiting.pop(msg_id, None)

    def _message(self, msg_id: str, msg_type: str, content: dict[str, Any], channel: str) -> dict[str, Any]:
        return {"header": {"msg_id": msg_id, "msg_type": msg_type, "username": self.person.name,
                           "session": "bench", "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "content": content, "channel": channel, "buffers": []}

    async def turn(self, n: int) -> Turn:
        """One cell typed as a prompt; timed until the kernel is idle again."""
        tag = f"LOADTURN-{uuid.uuid4().hex[:8]}"
        msg_id = uuid.uuid4().hex
        queue: asyncio.Queue[tuple[float, dict[str, Any]]] = asyncio.Queue()
        self.waiting[msg_id] = queue
        result, seen, idle, replied = Turn(), [], False, ""
        started = time.perf_counter()
        try:
            await self.ws.write_message(json.dumps(self._message(msg_id, "execute_request", {
                "code": f"Check the folder for turn {n} ({tag}).", "silent": False, "store_history": True,
                "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}, "shell")))
            while not (idle and replied):
                left = started + TURN_TIMEOUT - time.perf_counter()
                at, message = await asyncio.wait_for(queue.get(), max(left, 0.01))
                kind, text = message["msg_type"], json.dumps(message.get("content", {}))
                seen.append(text)
                if result.first_token is None and FIRST in text and message.get("channel") == "iopub":
                    result.first_token = at - started
                if kind == "error":
                    result.error = result.error or f"error: {text[:200]}"
                elif kind == "status" and message["content"].get("execution_state") == "idle":
                    idle = True
                elif kind == "execute_reply":
                    replied = message["content"].get("status", "?")
            result.total = time.perf_counter() - started
            if replied != "ok":
                result.error = result.error or f"execute_reply {replied}"
            if tag.replace("LOADTURN", "DONE") not in "".join(seen):
                result.error = LOST  # the answer of this turn never showed
                result.detail = f"{tag}: " + " | ".join(text[:300] for text in seen[-4:])
        except TimeoutError:
            result.error = LOST
        finally:
            self.waiting.pop(msg_id, None)
        return result

    async def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
        if self.reader is not None:
            self.reader.cancel()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def kernel_rss(kernel_id: str) -> tuple[float, float]:
    """MB of RSS of the kernel process (found by its connection file) with its children,
    and of the kernel process alone."""
    for proc in psutil.process_iter(["cmdline"]):
        if any(f"kernel-{kernel_id}.json" in part for part in proc.info["cmdline"] or []):
            try:
                own = proc.memory_info().rss
                children = sum(p.memory_info().rss for p in proc.children(recursive=True))
                return (own + children) / 2**20, own / 2**20
            except psutil.Error:
                continue
    raise RuntimeError(f"no process for kernel {kernel_id}")


def kernel_tree_rss(kernel_id: str) -> float:
    return kernel_rss(kernel_id)[0]


def kernel_parts(kernel_id: str) -> str:
    """The kernel's processes and their RSS, as one line (what an idle kernel is made of)."""
    for proc in psutil.process_iter(["cmdline"]):
        if any(f"kernel-{kernel_id}.json" in part for part in proc.info["cmdline"] or []):
            parts = []
            for member in [proc, *proc.children(recursive=True)]:
                try:
                    scripts = [os.path.basename(w) for w in member.cmdline() if w.endswith(".py")]
                    label = "kernel" if member is proc else " ".join([member.name(), *scripts[:1]])
                    parts.append(f"{label} {member.memory_info().rss / 2**20:.0f} MB")
                except psutil.Error:
                    pass
            return ", ".join(parts)
    return "?"


def pss_of(uids: set[int], hub_pid: int | None = None) -> float:
    """MB of PSS of every process of ``uids``; with ``hub_pid``, of the hub and its
    children that are not the people's (the proxy, the culler), instead."""
    total = 0
    chosen: list[psutil.Process] = []
    if hub_pid is None:
        chosen = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
    else:
        hub = psutil.Process(hub_pid)
        for proc in [hub, *hub.children(recursive=True)]:
            try:
                if proc.uids().real not in uids:
                    chosen.append(proc)
            except psutil.Error:
                pass
    for proc in chosen:
        try:
            total += proc.memory_full_info().pss
        except psutil.Error:
            pass
    return total / 2**20


PARTS = ("kernels", "servers", "proxy", "hub", "model+client", "other")


def servers_pss(uids: set[int]) -> float:
    """MB of PSS of the people's Jupyter servers alone (the rest of their memory is their
    kernels, with the job guards and sandbox servers the kernels started)."""
    total = 0
    for proc in psutil.process_iter(["uids", "cmdline"]):
        if proc.info["uids"] and proc.info["uids"].real in uids and any(
                "jupyterhub-singleuser" in part for part in proc.info["cmdline"] or []):
            try:
                total += proc.memory_full_info().pss
            except psutil.Error:
                pass
    return total / 2**20


def cpu_by_part(uids: set[int], hub_pid: int) -> dict[str, float]:
    """CPU seconds used so far by each part of the hub (a process's reaped children, as
    the sandboxed commands a kernel ran, count for it)."""
    spent = dict.fromkeys(PARTS, 0.0)
    for proc in psutil.process_iter(["uids", "cmdline", "cpu_times"]):
        cmdline, times = " ".join(proc.info["cmdline"] or []), proc.info["cpu_times"]
        if times is None:
            continue
        seconds = times.user + times.system + times.children_user + times.children_system
        mine = bool(proc.info["uids"] and proc.info["uids"].real in uids)
        if mine and "crystal_kernel" in cmdline:
            part = "kernels"
        elif mine and "jupyterhub-singleuser" in cmdline:
            part = "servers"
        elif mine:
            part = "kernels"  # a kernel's job guard, a tool still running
        elif "configurable-http-proxy" in cmdline:
            part = "proxy"
        elif proc.pid == hub_pid or "jupyterhub_idle_culler" in cmdline:
            part = "hub"
        elif proc.pid == os.getpid():
            part = "model+client"
        else:
            continue
        spent[part] += seconds
    return spent


class CpuWatch:
    """CPU seconds of each part, and of the whole machine, over a phase."""

    def __init__(self, uids: set[int], hub_pid: int) -> None:
        self.uids, self.hub_pid = uids, hub_pid
        self.parts, self.machine, self.wall = cpu_by_part(uids, hub_pid), psutil.cpu_times(), time.perf_counter()

    def done(self, turns: int) -> tuple[float, str]:
        """(CPU seconds a turn, one line: where they went, and how busy the machine was)."""
        parts, machine = cpu_by_part(self.uids, self.hub_pid), psutil.cpu_times()
        used = {k: parts[k] - self.parts[k] for k in PARTS}
        busy = sum(machine) - machine.idle - (sum(self.machine) - self.machine.idle)
        wall = time.perf_counter() - self.wall
        total = sum(used.values())
        where = ", ".join(f"{k} {v / turns * 1000:.0f} ms" for k, v in used.items() if k != "other")
        return total / turns, (f"a turn's CPU: {where}; the machine was {busy / (wall * psutil.cpu_count()):.0%} "
                               f"busy ({psutil.cpu_count()} cores, other work included)")


async def start_people(hub: Any, people: list[Any]) -> list[Notebook]:
    """Start the people's servers at once (as people arriving), then open their notebooks."""
    from tests.hub.conftest import SERVER_START, server_of, write_home_config

    for person in people:
        status, body = await asyncio.to_thread(hub.api, "POST", f"hub/api/users/{person.name}/server")
        if status not in (201, 202):
            raise RuntimeError(f"{person.name}'s server: {status} {body}")
    deadline = time.monotonic() + SERVER_START + 20 * len(people)
    waiting = list(people)
    while waiting:
        waiting = [p for p in waiting if not (await asyncio.to_thread(server_of, hub, p)).get("ready")]
        if time.monotonic() > deadline:
            raise RuntimeError(f"servers not ready: {[p.name for p in waiting]}; hub log tail:\n"
                               f"{hub.log.read_text()[-2000:]}")
        await asyncio.sleep(1)
    for person in people:
        write_home_config(person)
    notebooks = [Notebook(hub, person) for person in people]
    opened = await asyncio.gather(*(nb.open() for nb in notebooks), return_exceptions=True)
    for nb, outcome in zip(notebooks, opened):
        if isinstance(outcome, BaseException):  # counted in the errors row; the others go on
            nb.failed = f"{nb.person.name}'s notebook did not open: {type(outcome).__name__}: {outcome}"
            print(f"  {nb.failed[:2000]}", flush=True)
    return notebooks


async def at_once(notebooks: list[Notebook], turns: int) -> list[Turn]:
    async def person(nb: Notebook) -> list[Turn]:
        return [await nb.turn(n) for n in range(turns)]

    return [t for ts in await asyncio.gather(*(person(nb) for nb in notebooks)) for t in ts]


def time_rows(label: str, turns: list[Turn], solo: list[Turn], target: bool) -> list[dict[str, Any]]:
    def first_token(t: Turn) -> float | None:
        return t.first_token

    def total(t: Turn) -> float | None:
        return t.total

    rows = []
    for what, pick in (("first token", first_token), ("turn", total)):
        ours = [v for v in (pick(t) for t in turns if not t.error) if v is not None]
        alone = [v for v in (pick(t) for t in solo if not t.error) if v is not None]
        for q, name in ((0.5, "p50"), (0.95, "p95")):
            rows.append(row(f"hub load: {label}: {what} {name} vs 1 alone", percentile(ours, q) if ours else None,
                            percentile(alone, q) if alone else None, "s",
                            {"ratio_max": 3.0} if target and name == "p95" else None))
    return rows


async def paced(hub: Any, notebooks: list[Notebook]) -> tuple[list[dict[str, Any]], list[Turn]]:
    """The same turns with a model that streams at a hosted model's pace: alone, then all at once."""
    hub.server.router = router(PACE)
    try:
        alone = [await notebooks[0].turn(n) for n in range(SOLO_TURNS // 2)]
        turns = await at_once(notebooks, TURNS)
    finally:
        hub.server.router = router(0)
    rows = time_rows(f"{len(notebooks)} people paced", turns, alone, target=False)
    rows[0]["note"] = (f"paced: the model streams a piece each {PACE * 1000:.0f} ms, as a hosted one; "
                       f"alone: {SOLO_TURNS // 2} turns")
    print(f"  {len(notebooks)} people, paced model: turn p95 {percentile([t.total or 0 for t in turns], 0.95):.2f} s "
          f"(alone {percentile([t.total or 0 for t in alone], 0.95):.2f} s)", flush=True)
    return rows, alone + turns


async def measure(running: Any) -> list[dict[str, Any]]:
    from tests.hub.conftest import start_person

    hub = running.hub
    hub.server.router = router(0)
    people = list(hub.people.values())
    rows: list[dict[str, Any]] = []
    # One person alone; their fresh kernel, and a stock ipykernel in the same server.
    await asyncio.to_thread(start_person, hub, people[0])
    first = Notebook(hub, people[0])
    await first.open()
    await asyncio.sleep(3)
    fresh = [kernel_rss(first.kernel_id)]
    stock = Notebook(hub, people[0])
    await stock.open(kernel="python3", path="stock.ipynb")
    await asyncio.sleep(3)
    stock_rss = kernel_tree_rss(stock.kernel_id)
    await stock.close()
    await asyncio.to_thread(hub.api, "DELETE", f"user/{people[0].name}/api/kernels/{stock.kernel_id}",
                            token=people[0].token)
    warm = [await first.turn(-1 - n) for n in range(WARMUP)]  # not timed; lost or failed all the same
    assert running.proc is not None
    uids = {p.uid for p in people}
    watch = CpuWatch(uids, running.proc.pid)
    solo = [await first.turn(n) for n in range(SOLO_TURNS)]
    solo_cpu, solo_where = watch.done(SOLO_TURNS)
    alone_pss = pss_of({people[0].uid})
    print(f"  alone: turn p50 {percentile([t.total or 0 for t in solo], 0.5):.2f} s, {alone_pss:.0f} MB", flush=True)
    notebooks = [first]
    failures: list[str] = []
    all_turns: list[Turn] = warm + solo
    for count in PEOPLE:
        newcomers = people[len(notebooks):count]
        added = await start_people(hub, newcomers)
        failures += [nb.failed for nb in added if nb.failed]
        added = [nb for nb in added if not nb.failed]
        await asyncio.sleep(3)
        fresh += [kernel_rss(nb.kernel_id) for nb in added]
        for n in range(WARMUP):  # each one's warm-up turns
            all_turns += await asyncio.gather(*(nb.turn(-1 - n) for nb in added))
        notebooks += added
        watch = CpuWatch(uids, running.proc.pid)
        turns = await at_once(notebooks, TURNS)
        cpu, where = watch.done(len(turns))
        all_turns += turns
        rows += time_rows(f"{count} people", turns, solo, target=count == 10)
        rows.append(row(f"hub load: {count} people: CPU s a turn vs 1 alone", cpu, solo_cpu, "s",
                        note=f"{where}; alone: {solo_where}"))
        await asyncio.sleep(2)
        memory = pss_of({p.uid for p in people[:count]})
        servers = servers_pss({p.uid for p in people[:count]})
        rows.append(row(f"hub load: {count} people: their memory (PSS) vs 1", memory, alone_pss, "MB",
                        note=f"{memory / count:.0f} MB a person: their Jupyter server {servers / count:.0f} MB, "
                             f"their Crystal kernel with its children {(memory - servers) / count:.0f} MB; "
                             f"the machine's RAM is {psutil.virtual_memory().total / 2**30:.0f} GB"))
        print(f"  {count} people: turn p95 {percentile([t.total or 0 for t in turns], 0.95):.2f} s, "
              f"{memory:.0f} MB", flush=True)
        if count == PACED_PEOPLE:
            more, done = await paced(hub, notebooks)
            rows += more
            all_turns += done
    used = [kernel_tree_rss(nb.kernel_id) for nb in notebooks]
    own = statistics.median(f[1] for f in fresh)
    rows.append(row("hub load: idle Crystal kernel RSS vs stock ipykernel", statistics.median(f[0] for f in fresh),
                    stock_rss, "MB", {"ratio_max": 1.3},
                    note=f"median of {len(fresh)} kernels just started, with the job guard each starts; the kernel "
                         f"process alone {own:.1f} MB ({own / stock_rss:.2f}x)"))
    rows.append(row("hub load: Crystal kernel RSS idle after turns vs stock", statistics.median(used), stock_rss,
                    "MB", note="median of the kernels after their turns (the provider's SDK loaded); one: "
                    + kernel_parts(notebooks[0].kernel_id)))
    rows.append(row("hub load: the hub's own memory (hub, proxy, culler)",
                    pss_of({p.uid for p in people}, hub_pid=running.proc.pid), None, "MB"))
    lost = sum(t.error == LOST for t in all_turns)
    errors = failures + [t.error for t in all_turns if t.error and t.error != LOST]
    shown = [t.detail for t in all_turns if t.error == LOST and t.detail]
    rows.append(row("hub load: lost turns", lost, None, "turns", {"ours_max": 0},
                    note=f"of {len(all_turns)} turns" + (f"; one showed: {shown[0][:300]}" if shown else "")))
    if shown:
        print("  lost turns showed:\n    " + "\n    ".join(d[:1500] for d in shown[:3]), flush=True)
    rows.append(row("hub load: errors", len(errors), None, "turns", {"ours_max": 0},
                    note=errors[0][:200] if errors else None))
    for nb in notebooks:
        await nb.close()
    return rows


def main() -> list[dict[str, Any]]:
    names = [f"{what} people" for what in PEOPLE]
    if os.getuid() != 0:
        return [skipped_row(f"hub load: {n}", "s", "needs root: the hub's people are real Unix users") for n in names]
    from tests.hub.conftest import CHP, running_hub

    if not CHP.exists():
        return [skipped_row(f"hub load: {n}", "s", "configurable-http-proxy missing: run `make hub-deps`")
                for n in names]
    started = time.perf_counter()
    with running_hub([f"p{i:02d}" for i in range(max(PEOPLE))], start_servers=False) as running:
        rows = asyncio.run(measure(running))
    print(f"  hub load bench: {time.perf_counter() - started:.0f} s")
    return rows


if __name__ == "__main__":
    main()
