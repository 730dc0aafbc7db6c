"""The per-round rates under the summary are whole ops per second, as the JSON has them,
and the rounds a user adds up give the mean printed beside them."""

from __future__ import annotations

import re

from kvbench.report import document, summarize
from tests.support.runs import make_run, summary_text


def test_round_rates_are_exact_and_add_up_to_the_printed_mean() -> None:
    # 10,843 / 10,801 / 10,912 / 10,777 ops in 1-second rounds: "10.8k" each, rounded
    run = make_run("r", [{"get": (n, 200_000)} for n in (10_843, 10_801, 10_912, 10_777)])
    text = summary_text(run)
    rounds_line = next(line for line in text.splitlines() if line.startswith("rounds:"))
    printed = [int(f.replace(",", "")) for f in re.findall(r"[\d,]+", rounds_line)]
    assert printed == [10_843, 10_801, 10_912, 10_777]
    doc = document(summarize(run))
    assert printed == [round(r["throughput_per_s"]) for r in doc["rounds"]]
    mean = re.search(r"mean ([\d,]+) ops/s", text)
    assert mean is not None
    printed_mean = int(mean.group(1).replace(",", ""))
    # each printed round and the printed mean are within half an op/s of the exact ones
    assert abs(sum(printed) / len(printed) - printed_mean) <= 1
    assert printed_mean == round(doc["throughput_per_s_spread"]["mean"])
    assert "k " not in rounds_line and "k ops/s" not in text.split("rounds:")[1]
