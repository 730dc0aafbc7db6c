"""Server statistics as samples store them: every value a string, read as a number here.

memcached's ``stats`` values are numbers; Redis ``INFO`` adds text (versions, modes) and
``cmdstat_<command>`` entries such as ``calls=12,usec=34,usec_per_call=2.83``, whose number
is the ``calls``.
"""

from __future__ import annotations


def stat_number(name: str, value: object, field: str = "calls") -> float | None:
    """The number a stat stands for (a command's ``field`` for ``cmdstat_*``: its calls,
    or ``rejected_calls`` (Redis 7.0: refused before running, a cluster's redirects
    included), ...), or None."""
    if name.startswith("cmdstat_"):
        fields = dict(part.split("=", 1) for part in str(value).split(",") if "=" in part)
        try:
            return float(fields.get(field, 0))
        except ValueError:
            return None
    try:
        return float(str(value))
    except ValueError:
        return None
