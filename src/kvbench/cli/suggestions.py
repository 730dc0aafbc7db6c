"""Unknown flags answered with the flag meant, other tools' names included.

click already says "Did you mean ...?" by spelling alone, so ``--wokers`` got ``--keys``
and memtier's ``--threads`` got nothing useful. The group below asks
``config.names.did_you_mean`` instead, which also knows what other load generators call
our options (``--threads`` -> ``--processes``, ``--clients`` -> ``--connections``), and
memtier_benchmark's and redis-benchmark's flags by their exact names first
(``config.names.OTHER_TOOLS_FLAGS``: ``--run-count`` -> ``--rounds``, ``-t``, ``--select-db``
-> the URL's /DB), with how the two differ where they do.
"""

from __future__ import annotations

from typing import Any

import click

from kvbench.config.names import did_you_mean, other_tool_flag


def options(command: click.Command) -> list[str]:
    """Every option ``command`` takes, long and short."""
    return [opt for param in command.params for opt in (*param.opts, *param.secondary_opts)]


class UnknownOption(click.NoSuchOption):
    """click's NoSuchOption, answered with another tool's equivalent or ``did_you_mean``'s
    guess instead of click's own."""

    def __init__(
        self, original: click.NoSuchOption, best: str | None, other_tool: str | None = None
    ) -> None:
        super().__init__(original.option_name, original.message, None, original.ctx)
        self.best = best
        self.other_tool = other_tool

    def format_message(self) -> str:
        if self.other_tool:
            return f"{self.message} {self.other_tool}"
        return f"{self.message} Did you mean {self.best!r}?" if self.best else self.message


class SuggestingGroup(click.Group):
    """A click group whose commands suggest flags with ``did_you_mean``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            if exc.ctx is None:
                raise
            known = options(exc.ctx.command)
            other_tool = other_tool_flag(exc.option_name, known)
            if other_tool is None and not exc.option_name.startswith("--"):
                raise
            long_ones = [opt for opt in known if opt.startswith("--")]
            best = did_you_mean(exc.option_name, long_ones, "--")
            raise UnknownOption(exc, best, other_tool) from None
