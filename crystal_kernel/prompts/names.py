"""Names shared by the prompt modules: the named prompts, the folder-name rule, the
manifest limits and the host-owned placeholder names."""

from __future__ import annotations

import re

# PS-1 / PS-6: every named prompt, in the order listings show them.
NAMED_PROMPTS: tuple[str, ...] = (
    "work", "plan", "review", "review.user", "topic",
    "compaction.system", "compaction.user", "image.system", "image.user",
)
# PA-1: attachments append only to these.
ATTACHABLE: tuple[str, ...] = ("work", "plan", "review")
# PS-1 / PA-2: accepted file suffixes, in lookup order.
SUFFIXES: tuple[str, ...] = (".md", ".txt")

# PA-3: 1–64 characters, lowercase letters, digits and single hyphens.
_FOLDER_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_FOLDER_NAME = 64
MAX_TITLE = 80          # PS-4 `name`
MAX_DESCRIPTION = 280   # PS-4 `description`

# PS-2: the virtual built-in selection; never a folder.
DEFAULT_SET = "default"

# PH-2 / PH-3: host-owned session slots.
COMPOSITE_SLOTS: tuple[str, ...] = ("env", "skills", "directories", "instructions_section", "instructions")
ATOMIC_SLOTS: tuple[str, ...] = (
    "workspace", "is_git_repo", "git_root", "platform", "os", "architecture", "date", "time",
    "provider", "model", "model_line", "mode", "product_name", "session_id", "approval",
)
# PH-7: per-call slots a caller passes in, by prompt name.
EXTRA_SLOTS: dict[str, tuple[str, ...]] = {
    "review.user": ("conversation", "tool_name", "tool_arguments", "host_risk", "host_authority",
                    "classification_summary"),
    "compaction.user": ("conversation", "prior_summary_section", "summary_task", "output_template",
                        "todos_section"),
    "image.user": ("question",),
}
# PH-8: plugins may not take any of these.
HOST_SLOTS: frozenset[str] = frozenset(
    COMPOSITE_SLOTS + ATOMIC_SLOTS + tuple(n for names in EXTRA_SLOTS.values() for n in names)
)


def valid_folder_name(name: str) -> bool:
    """PA-3: a folder name in hyphen form, 1–64 characters."""
    return 0 < len(name) <= MAX_FOLDER_NAME and _FOLDER_RE.fullmatch(name) is not None


def folder_name_problem(name: str) -> str | None:
    """An English reason when ``name`` is not a valid set/attachment folder name."""
    if valid_folder_name(name):
        return None
    return (f"'{name}' is not a valid name: use 1–64 lowercase letters, digits and single "
            "hyphens (for example my-prompts).")
