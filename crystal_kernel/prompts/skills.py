"""Skills: folders with a SKILL.md (YAML front matter ``name`` and ``description``, then
the instructions), under ``{home}/skills/<name>/`` and ``<workspace>/.crystal/skills/<name>/``.

The ``{{skills}}`` slot lists them (:func:`skills_text`); the skill tool returns a
skill's body. A workspace skill replaces a home skill of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crystal_kernel.core import paths
from crystal_kernel.core.access import project_file_problem

MAX_SKILL_BYTES = 256 * 1024
MAX_SKILLS = 200
MAX_DESCRIPTION_CHARS = 1024


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path  # the SKILL.md file

    @property
    def folder(self) -> Path:
        return self.path.parent

    def body(self) -> str:
        return split_front_matter(_read(self.path))[1]


def _read(path: Path) -> str:
    with open(path, "rb") as handle:
        return handle.read(MAX_SKILL_BYTES).decode("utf-8", errors="replace")


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        return inner.replace("''", "'") if value[0] == "'" else inner.replace('\\"', '"')
    return value


def split_front_matter(text: str) -> tuple[dict[str, str], str]:
    """The small YAML subset skills use: ``key: value`` lines (quoted or plain), block
    scalars (``|`` or ``>``) and indented continuation lines. Returns (fields, body)."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() in ("---", "..."))
    except StopIteration:
        return {}, text
    fields: dict[str, str] = {}
    key: str | None = None
    block: str | None = None
    for line in lines[1:end]:
        if key and (line.startswith((" ", "\t")) or not line.strip()):
            piece = line.strip()
            joiner = "\n" if block == "|" else " "
            fields[key] = (fields[key] + joiner + piece) if fields[key] else piece
            continue
        if line.lstrip().startswith("#") or ":" not in line:
            key = None
            continue
        name, _, value = line.partition(":")
        key = name.strip()
        value = value.strip()
        block = value[:1] if value[:1] in ("|", ">") else None
        fields[key] = "" if block else _unquote(value)
    body = "\n".join(lines[end + 1 :]).strip("\n")
    return {k: v.strip() for k, v in fields.items()}, body


def discover_skills(home: Path, workspace: Path) -> list[Skill]:
    """Skills under home, then the workspace (which wins on a name clash), by name."""
    found: dict[str, Skill] = {}
    for root in (Path(home) / "skills", paths.workspace_skills_dir(workspace)):
        try:
            folders = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            continue
        for folder in folders[:MAX_SKILLS]:
            md = folder / "SKILL.md"
            if not md.is_file():
                continue
            # TRUST-4: a workspace skill is read only where it really lies in the workspace.
            if root != Path(home) / "skills" and project_file_problem(md, workspace):
                continue
            try:
                fields, _ = split_front_matter(_read(md))
            except OSError:
                continue
            name = fields.get("name") or folder.name
            description = fields.get("description", "")
            if not description:
                continue
            found[name] = Skill(name, " ".join(description.split())[:MAX_DESCRIPTION_CHARS], md)
    return [found[n] for n in sorted(found)]


def skills_text(skills: list[Skill]) -> str:
    """The ``{{skills}}`` slot: empty without skills, else one line per skill."""
    if not skills:
        return ""
    lines = ["Skills you can load with the skill tool when a task matches their description:"]
    lines += [f"- {s.name}: {s.description}" for s in skills]
    return "\n".join(lines)
