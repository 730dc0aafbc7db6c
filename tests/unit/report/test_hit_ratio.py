"""One figure everywhere: the hit % the terminal prints is the document's hit_ratio.

1,649 hits of 99,941 gets is 1.6499...%: the terminal printed 1.6% from the ratio while the
document kept it rounded to 0.0165, which reads 1.7% (a width test caught the two apart).
"""

from __future__ import annotations

from kvbench.report import summarize
from kvbench.report.json_report import document
from tests.support.runs import make_run


def test_the_documents_hit_ratio_is_the_one_the_terminal_formats() -> None:
    run = make_run("r", [{"get": (99_941, 1000)}])
    run.intervals[0].counts["get"] = {"hit": 1_649, "miss": 99_941 - 1_649}
    model = summarize(run)
    (row,) = model.ops
    ratio = document(model)["ops"]["get"]["hit_ratio"]
    assert ratio == row.hit_ratio == 1_649 / 99_941
    assert f"{ratio:.1%}" == "1.6%"
