"""SPEC §6: prompt templates and placeholders (PH-1 … PH-12), on real folders."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from crystal_kernel.plugins import hookimpl, plugin_manager
from crystal_kernel.prompts.compose import compose, compose_named, compose_system
from crystal_kernel.prompts.context import PromptContext
from crystal_kernel.prompts.names import ATOMIC_SLOTS, NAMED_PROMPTS
from crystal_kernel.prompts.placeholders import TOKEN_RE, Binder, slots_in
from crystal_kernel.prompts.promptsets import builtin_text
from crystal_kernel.prompts.selection import resolve_selection


def _override(root: Path, name: str, text: str) -> None:
    (root / "prompts").mkdir(parents=True, exist_ok=True)
    (root / "prompts" / f"{name}.md").write_text(text, encoding="utf-8")


def _ctx(home: Path, workspace: Path, **kw) -> PromptContext:
    kw.setdefault("provider", "openai")
    kw.setdefault("model", "gpt-test")
    return PromptContext(workspace=workspace, home=home, **kw)


def _compose(name, home, workspace, extra=None, notes=None, **kw) -> str:
    return compose(name, _ctx(home, workspace, **kw), resolve_selection(home, workspace), extra, notes)


def test_PH_1_work_and_plan_are_overridable_templates_with_host_placeholders(home, workspace):
    _override(home, "work", "W {{product_name}} in {{workspace}} as {{mode}}\n")
    _override(home, "plan", "P {{mode}} {{approval}}\n")
    _override(home, "compaction.system", "C {{mode}} {{product_name}}\n")
    assert _compose("work", home, workspace) == f"W Crystal in {workspace} as work\n"
    assert _compose("plan", home, workspace, approval="edit") == "P plan edit\n"
    # Review and compaction use the same syntax.
    assert _compose("compaction.system", home, workspace) == "C compaction Crystal\n"
    assert "{{" not in _compose("review", home, workspace)


def test_PH_2_composite_slots(home, workspace):
    (workspace / "AGENTS.md").write_text("Use tabs.\n")
    _override(home, "work", "E[{{env}}]\nS[{{skills}}]\nD[{{directories}}]\nI[{{instructions}}]\n"
              "X[{{instructions_section}}]\n")
    text = _compose("work", home, workspace, skills="Skill: deploy", directories="Dirs text")
    assert "Operating system:" in text.split("S[")[0]
    assert "S[Skill: deploy]" in text
    assert "D[Dirs text]" in text
    raw = text.split("I[")[1].split("]")[0]
    assert raw == f"From {workspace / 'AGENTS.md'}:\nUse tabs.\n\nDirs text"
    assert "X[# Workspace instructions" in text and "Use tabs." in text.split("X[")[1]


def test_PH_3_atomic_slots(home, workspace, tmp_path):
    _override(home, "work", "\n".join(f"{n}=[{{{{{n}}}}}]" for n in ATOMIC_SLOTS) + "\n")
    text = _compose("work", home, workspace, session_id="s-123", approval="audit")
    values = dict(re.findall(r"^(\w+)=\[(.*)\]$", text, re.M))
    assert values["workspace"] == str(workspace)
    assert values["is_git_repo"] == "no" and values["git_root"] == ""
    assert values["platform"] in ("linux", "macos", "windows") and values["os"] and values["architecture"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", values["date"])
    # Local time with a numeric UTC offset.
    assert re.fullmatch(r"\d\d:\d\d:\d\d [+-]\d\d:\d\d", values["time"])
    assert values["provider"] == "openai" and values["model"] == "gpt-test"
    assert values["model_line"] == "You are running as the model gpt-test through the openai provider."
    assert values["mode"] == "work" and values["product_name"] == "Crystal"
    assert values["session_id"] == "s-123" and values["approval"] == "audit"

    # is_git_repo: only when the workspace itself holds .git (folder or file);
    # git_root: found by walking up.
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "pkg"
    sub.mkdir()
    values = dict(re.findall(r"^(\w+)=\[(.*)\]$", _compose("work", home, sub), re.M))
    assert values["is_git_repo"] == "no" and values["git_root"] == str(repo)
    worktree = tmp_path / "worktree"
    worktree.mkdir()
    (worktree / ".git").write_text("gitdir: elsewhere\n")
    values = dict(re.findall(r"^(\w+)=\[(.*)\]$", _compose("work", home, worktree), re.M))
    assert values["is_git_repo"] == "yes" and values["git_root"] == str(worktree)


def test_PH_4_mode_value_per_prompt(home, workspace):
    for name in ("work", "plan", "review", "compaction.system", "image.system"):
        _override(home, name, "mode={{mode}}\n")
    assert _compose("work", home, workspace) == "mode=work\n"
    assert _compose("plan", home, workspace) == "mode=plan\n"
    assert _compose("review", home, workspace) == "mode=review\n"
    assert _compose("compaction.system", home, workspace) == "mode=compaction\n"
    assert _compose("image.system", home, workspace) == "mode=image\n"


def test_PH_5_env_block(home, workspace, tmp_path):
    _override(home, "work", "{{env}}\n")
    bare = _compose("work", home, workspace, approval="")
    assert [line.split(":")[0] for line in bare.splitlines()] == ["Operating system", "Architecture", "Local time"]
    (workspace / ".git").mkdir()
    full = _compose("work", home, workspace, session_id="abc", approval="edit")
    assert f"Git repository root: {workspace}" in full
    assert "Session: abc" in full and "Approval mode: edit" in full


def test_PH_6_directories_slot_and_refresh(home, workspace, tmp_path, make_session):
    _override(home, "work", "D[{{directories}}]\n{{instructions_section}}\n")
    session = make_session()
    assert compose_system(session).startswith("D[]\n")
    extra = tmp_path / "data"
    extra.mkdir()
    session.access.add(extra, "ro")
    session.refresh_system()  # what /access does: the active system message is replaced
    text = session.system_text()
    assert f"D[Directories added to this session besides the workspace:\n- {extra} (read only)]" in text
    # The same text is appended to the workspace instructions.
    assert text.count(f"- {extra} (read only)") == 2
    # Built-in templates do not declare it.
    for name in NAMED_PROMPTS:
        assert "directories" not in slots_in(builtin_text(name))


def test_PH_7_per_call_slots(home, workspace):
    review_user = _compose("review.user", home, workspace, extra={
        "conversation": "CONV", "tool_name": "bash", "tool_arguments": '{"command": "ls"}',
        "host_risk": "execute", "host_authority": "workspace", "classification_summary": "SUMMARY"})
    for value in ("CONV", "bash", '{"command": "ls"}', "risk execute, authority workspace", "SUMMARY"):
        assert value in review_user
    compaction = _compose("compaction.user", home, workspace, extra={
        "conversation": "CONV", "prior_summary_section": "PRIOR", "summary_task": "TASK",
        "output_template": "## TEMPLATE", "todos_section": "TODOS"})
    assert [compaction.index(v) for v in ("PRIOR", "CONV", "TODOS", "TASK", "## TEMPLATE")] == sorted(
        compaction.index(v) for v in ("PRIOR", "CONV", "TODOS", "TASK", "## TEMPLATE"))
    assert "TODOS" in compaction and "{{" not in compaction
    assert _compose("image.user", home, workspace, extra={"question": "What error is shown?"}).endswith(
        "What error is shown?\n")
    # A declared slot the caller leaves out binds to nothing; slots of other prompts do not bind here.
    _override(home, "image.user", "{{question}}|{{tool_name}}\n")
    assert _compose("image.user", home, workspace, extra={"tool_name": "x"}) == "|{{tool_name}}\n"


class _Plugin:
    def __init__(self, values):
        self.values = values

    @hookimpl
    def crystal_placeholders(self):
        return self.values


def test_PH_8_plugin_placeholders(home, workspace, mkatt):
    pm = plugin_manager()
    pm.register(_Plugin({"ticket": lambda ctx: f"T-{ctx.mode}", "workspace": lambda ctx: "hijack"}), name="first")
    pm.register(_Plugin({"ticket": lambda ctx: "second-wins?", "team": lambda ctx: "core"}), name="second")
    mkatt("extra", {"enabled": True}, review_md="att {{ticket}}\n")
    for name in ("work", "review", "compaction.user", "image.system"):
        _override(home, name, "{{ticket}} {{team}} {{workspace}}\n")
    notes: list[str] = []
    assert _compose("work", home, workspace, notes=notes) == f"T-work core {workspace}\n"
    assert any("cannot take the placeholder {{workspace}}" in n for n in notes)
    assert any("'first' loaded first and keeps it" in n for n in notes)
    # Same binding pass for Review (attachments included), compaction and image description.
    assert _compose("review", home, workspace) == f"T-review core {workspace}\n\natt T-review\n"
    assert _compose("compaction.user", home, workspace, extra={}).startswith("T-compaction core")
    assert _compose("image.system", home, workspace).startswith("T-image core")


def test_PH_9_values_stay_literal_and_failing_resolvers_leave_tokens(home, workspace):
    def boom(ctx):
        raise RuntimeError("no ticket service")

    plugin_manager().register(_Plugin({"boom": boom, "nothing": lambda ctx: None,
                                       "sneaky": lambda ctx: "{{workspace}}"}), name="p")
    _override(home, "work", "a {{boom}} b {{nothing}} c {{sneaky}} d {{unknown}}\n")
    notes: list[str] = []
    text = _compose("work", home, workspace, notes=notes)
    assert text == "a {{boom}} b {{nothing}} c {{workspace}} d {{unknown}}\n"
    assert any("{{boom}}" in n and "no ticket service" in n for n in notes)
    assert any("{{nothing}}" in n and "returned no text" in n for n in notes)
    # Host values containing tokens stay literal too.
    _override(home, "review.user", "{{conversation}} / {{tool_name}}\n")
    assert _compose("review.user", home, workspace, extra={"conversation": "{{tool_name}}", "tool_name": "bash"}) \
        == "{{tool_name}} / bash\n"


def test_PH_10_builtin_templates_declare_their_slots():
    """The tokens a template uses are its declaration (docs/prompts.md pins this table)."""
    session = ["product_name", "workspace", "model_line", "mode", "approval", "is_git_repo", "env", "skills",
               "instructions_section"]
    expected = {
        "work": session, "plan": session,
        "review": ["product_name", "workspace", "mode"],
        "review.user": ["conversation", "tool_name", "tool_arguments", "host_risk", "host_authority",
                        "classification_summary"],
        "topic": ["product_name"],
        "compaction.system": ["product_name", "mode", "workspace"],
        "compaction.user": ["prior_summary_section", "conversation", "todos_section", "summary_task",
                            "output_template"],
        "image.system": ["product_name", "mode"],
        "image.user": ["question"],
    }
    assert {name: slots_in(builtin_text(name)) for name in NAMED_PROMPTS} == expected


def test_PH_11_topic_is_a_replaceable_named_prompt(home, workspace, mkset):
    assert "title" in _compose("topic", home, workspace)
    mkset("mine", {"enabled": True}, topic_md="Set topic {{product_name}}\n")
    assert _compose("topic", home, workspace) == "Set topic Crystal\n"
    (workspace / ".crystal" / "prompts").mkdir(parents=True)
    (workspace / ".crystal" / "prompts" / "topic.md").write_text("Workspace topic\n")
    assert _compose("topic", home, workspace) == "Workspace topic\n"


def test_PH_12_values_refresh_and_are_not_override_files(home, workspace, tmp_path, make_session):
    _override(home, "work", "{{workspace}} {{approval}} {{model}}\n")
    # Composite values are not override files: these files change nothing.
    _override(home, "env", "ENV OVERRIDE\n")
    _override(home, "skills", "SKILLS OVERRIDE\n")
    session = make_session()
    assert session.system_text() == f"{workspace} default gpt-test\n"
    other = tmp_path / "other"
    other.mkdir()
    session.change_directory(str(other))
    session.set_approval("edit")
    session.provider.model = "gpt-other"
    session.refresh_system()
    assert session.system_text() == f"{other} edit gpt-other\n"
    assert "OVERRIDE" not in compose_named("work", session)


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.one_of(
        st.text(alphabet="ab {}\n", max_size=8),
        st.sampled_from(["{{x}}", "{{ y }}", "{{z}}", "{{x", "}}", "{{{x}}}", "{{}}", "{{bad-name}}"]),
    ), max_size=20).map("".join),
    values=st.dictionaries(st.sampled_from(["x", "y", "z"]),
                           st.text(alphabet="xyz{} ", max_size=12), max_size=3),
)
def test_PH_9_binder_property_one_pass_never_raises(text, values):
    bound = Binder(values).bind(text)
    # Reference: split the template on tokens and rebuild; values are never rescanned.
    expected, last = [], 0
    for match in TOKEN_RE.finditer(text):
        expected.append(text[last:match.start()])
        expected.append(values.get(match.group(1), match.group(0)))
        last = match.end()
    expected.append(text[last:])
    assert bound == "".join(expected)


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=30), name=st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True),
       fails=st.booleans())
def test_PH_9_binder_property_lazy_resolvers(value, name, fails):
    notes: list[str] = []

    def resolver():
        if fails:
            raise ValueError("x")
        return value

    text = f"<{{{{{name}}}}}>{{{{{name}}}}}"
    bound = Binder({}, {name: resolver}, notes).bind(text)
    if fails:
        assert bound == text and len(notes) == 1  # resolved once per binder, one note
    else:
        assert bound == f"<{value}>{value}" and notes == []
