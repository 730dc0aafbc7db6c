"""Unknown flags answered with the flag meant, other tools' names included.

click already says "Did you mean ...?" by spelling alone, so ``--wokers`` got ``--keys``
and memtier's ``--threads`` got nothing useful. The group below asks
``config.names.did_you_mean`` instead, which also knows what other load generators call
our options (``--threads`` -> ``--processes``, ``--clients`` -> ``--connections``).
"""

from __future__ import annotations

from typing import Any

import click

from kvbench.config.names import did_you_mean


def long_options(command: click.Command) -> list[str]:
    """Every ``--long`` option ``command`` takes."""
    return [
        opt
        for param in command.params
        for opt in (*param.opts, *param.secondary_opts)
        if opt.startswith("--")
    ]


class UnknownOption(click.NoSuchOption):
    """click's NoSuchOption, suggesting ``did_you_mean``'s answer instead of click's own."""

    def __init__(self, original: click.NoSuchOption, best: str | None) -> None:
        super().__init__(original.option_name, original.message, None, original.ctx)
        self.best = best

    def format_message(self) -> str:
        return f"{self.message} Did you mean {self.best!r}?" if self.best else self.message


class SuggestingGroup(click.Group):
    """A click group whose commands suggest flags with ``did_you_mean``."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            if exc.ctx is None or not exc.option_name.startswith("--"):
                raise
            best = did_you_mean(exc.option_name, long_options(exc.ctx.command), "--")
            raise UnknownOption(exc, best) from None
