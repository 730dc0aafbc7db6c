"""``--verify`` results: get hits checked, mismatches, example keys, and their verdict.

Pure: computed from a stored run. Counts cover every phase (warm-up and drain too: a
wrong value is wrong whenever it is read); the per-op ``mismatch`` outcome in the table
covers the measured window only, like every other outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvbench.report.verdicts import Verdict
from kvbench.results.model import RunResult

# Example keys shown in the summary and the document.
EXAMPLE_KEYS = 10


@dataclass(frozen=True, slots=True)
class Verification:
    """What ``--verify`` found over the whole run."""

    checked: int  # get hits whose value was checked
    mismatches: int  # of those, values kvbench did not write for that key
    example_keys: list[str]


def verification(run: RunResult) -> Verification | None:
    """The run's verification tally, or None when it ran without ``--verify``."""
    if not run.config.get("workload", {}).get("verify"):
        return None
    snapshots = run.intervals + list(run.phases.values())
    checked = sum(int(s.stats.get("verified", 0)) for s in snapshots)
    mismatches = sum(
        n
        for s in snapshots
        for n in (outcomes.get("mismatch", 0) for outcomes in s.counts.values())
    )
    examples: list[str] = []
    for worker in run.workers:
        for key in worker.get("mismatch_keys", []):
            if key not in examples and len(examples) < EXAMPLE_KEYS:
                examples.append(key)
    return Verification(checked, mismatches, examples)


def verification_verdicts(found: Verification | None) -> list[Verdict]:
    """``verify.mismatch`` when a get returned a value kvbench did not write."""
    if found is None or not found.mismatches:
        return []
    shown = ", ".join(found.example_keys[:3])
    return [
        Verdict(
            "verify.mismatch",
            "warning",
            f"{found.mismatches:,} of {found.checked:,} get hits returned a value kvbench did "
            f"not write for that key (e.g. {shown}): another client wrote these keys, or data "
            "was corrupted",
            {
                "mismatches": found.mismatches,
                "checked": found.checked,
                "example_keys": found.example_keys,
            },
        )
    ]
