"""The skill tool: returns a skill's body (the skills are found by
:mod:`crystal_kernel.prompts.skills`, which also fills the ``{{skills}}`` slot)."""

from __future__ import annotations

from pydantic import Field

from crystal_kernel.core.errors import ToolError
from crystal_kernel.prompts.skills import discover_skills
from crystal_kernel.tools.base import Risk, Tool, ToolContext, ToolInput, ToolResult, truncate_output


class SkillInput(ToolInput):
    name: str = Field(description="The name of the skill to load, as listed in the system text.")


class SkillTool(Tool[SkillInput]):
    name = "skill"
    Input = SkillInput
    risk = Risk.READ

    async def run(self, args: SkillInput, ctx: ToolContext) -> ToolResult:
        skills = discover_skills(ctx.home, ctx.workspace)
        for skill in skills:
            if skill.name == args.name:
                try:
                    body = skill.body()
                except OSError as exc:
                    raise ToolError(f"Cannot read skill '{args.name}': {exc.strerror or exc}.") from None
                text = (
                    f"Skill '{skill.name}' (folder {skill.folder}; files it mentions are relative to it)\n\n"
                    + body
                )
                return ToolResult(ok=True, text=truncate_output(text, ctx.config.tool_output_limit))
        names = ", ".join(s.name for s in skills) or "none"
        raise ToolError(f"There is no skill named '{args.name}'. Available skills: {names}.")
