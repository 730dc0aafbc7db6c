"""The HTML report of real runs, opened in headless Chromium from a file:// URL.

Checks that the page loads with no console output (the chart code logs only on failure;
an uncaught exception shows up as a CONSOLE line too), that every chart was drawn, that
the figures in the rendered page equal the run's JSON document, and that a screenshot is
not blank. Needs the Debian ``chromium`` package (skips without it; fails under CI).
"""

from __future__ import annotations

import json
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.support import servers
from tests.support.cli import read_json, run_kvbench
from tests.support.report_page import Figures, parse, resolve

pytestmark = pytest.mark.integration

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)


def chromium(tmp_path: Path, page: Path, *args: str) -> tuple[str, str]:
    """Run headless Chromium on ``page``; returns (stdout, stderr)."""
    binary = servers.require_binary("chromium", "chromium")
    profile = tmp_path / f"profile-{page.stem}-{len(args)}"
    proc = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def load(tmp_path: Path, page: Path) -> Figures:
    """The page's DOM after its script ran; no console output allowed."""
    return figures_of(dom_of(tmp_path, page))


def figures_of(dom: str) -> Figures:
    """The figures of a page's DOM, every chart drawn."""
    parsed = parse(dom)
    assert parsed.figures, "no charts in the page"
    undrawn = [f.get("data-chart") for f in parsed.figures if f.get("data-drawn") != "yes"]
    assert undrawn == []
    return parsed


def png_rows(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and the (filtered) scanlines of a PNG, stdlib only."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    return width, height, [raw[i : i + stride] for i in range(0, len(raw), stride)]


def test_reports_of_real_runs_render_in_chromium(tmp_path: Path) -> None:
    db = str(tmp_path / "history.db")
    single, compared = tmp_path / "run.html", tmp_path / "compare.html"
    with servers.memcached() as server:
        url = f"memcached://{server.address}"
        common = ("--processes", "1", "-c", "4", "--db", db, "--no-live")
        closed = run_kvbench(
            "run", url, "--duration", "2s", *common,
            "--json", str(tmp_path / "closed.json"), "--report", str(single),
        )  # fmt: skip
        assert closed.code == 0, closed.stderr
        opened = run_kvbench(
            "run", url, "--duration", "1s", "--rounds", "2", "--rate", "2k", *common,
            "--json", str(tmp_path / "open.json"),
        )  # fmt: skip
        assert opened.code in (0, 4), opened.stderr
    docs = [read_json(tmp_path / "closed.json"), read_json(tmp_path / "open.json")]
    result = run_kvbench(
        "report", docs[0]["run_id"], docs[1]["run_id"], "-o", str(compared), "--db", db
    )
    assert result.code == 0, result.stderr
    assert single.stat().st_size < 1_500_000

    single_dom = dom_of(tmp_path, single)  # one Chromium for the figures and the heatmaps
    page = figures_of(single_dom)
    assert page.series_paths >= 8  # throughput, p99, spectrum per op; server series
    assert len(page.cells) > 30
    for pointer, value, _ in page.cells:
        assert json.loads(value) == resolve(docs[:1], pointer), pointer

    # `kvbench report` reads the history, so its reference is the stored runs' documents
    # (`show --json`): a histogram's max is kept at bucket precision by the V2 encoding.
    stored = [
        json.loads(run_kvbench("show", doc["run_id"], "--json", "--db", db).stdout) for doc in docs
    ]
    # show --over-time of the stored run: its rows add up to the run, their max is its max
    shown = run_kvbench("show", docs[0]["run_id"], "--over-time", "--json", "--db", db)
    assert shown.code == 0, shown.stderr
    rows = json.loads(shown.stdout)
    assert len(rows) == len(stored[0]["intervals"])
    for op, figures in stored[0]["ops"].items():
        assert sum(r["ops"][op]["ops"] for r in rows) == figures["count"]
        assert max(r["ops"][op]["max_us"] or 0 for r in rows) == figures["latency_us"]["max"]
    both = load(tmp_path, compared)
    assert {f.get("data-chart") for f in both.figures} >= {"compare-throughput", "compare-spectrum"}
    assert both.series_paths > page.series_paths
    for pointer, value, _ in both.cells:
        assert json.loads(value) == resolve(stored, pointer), pointer

    check_heatmaps(single_dom, docs[0])

    shot = tmp_path / "run.png"
    _, stderr = chromium(tmp_path, single, f"--screenshot={shot}", "--window-size=1280,2400")
    assert console_lines(stderr) == []
    width, height, rows = png_rows(shot)
    assert (width, height) == (1280, 2400)
    assert len(set(rows)) > 200, "the screenshot is (nearly) uniform: nothing was drawn"


def test_a_comparison_table_fits_a_1280_px_page(tmp_path: Path) -> None:
    """Was 1259 px of table in a 1184 px column: the page scrolled sideways. The header
    names every compared target."""
    import re

    from kvbench.report.html import render
    from tests.support.runs import make_run

    ops = {"get": (309_512_345, 4_000_000), "set": (30_951_234, 9_000_000)}
    runs = [make_run(f"20261201-1200{i}-abcdef", [ops] * 3) for i in range(2)]
    gateway = "http+memc://127.0.0.1:8080/memc?stats=memcached://127.0.0.1:11211"
    runs[0].targets = [{"url": gateway, "protocol": "http1"}]
    measure = (
        "<script>window.addEventListener('load', () => { const t = document.querySelector("
        "'#compare table'); document.body.setAttribute('data-width', "
        "`${t.getBoundingClientRect().right} ${document.documentElement.scrollWidth}`); });"
        "</script></body>"
    )
    page = tmp_path / "compare.html"
    html = render(runs)
    page.write_text(html.replace("</body>", measure))
    dom, _ = chromium(tmp_path, page, "--window-size=1280,2000", "--dump-dom")
    match = re.search(r'data-width="([\d.]+) (\d+)"', dom)
    assert match, "the measuring script did not run"
    right, page_width = float(match.group(1)), int(match.group(2))
    assert right <= 1280 and page_width <= 1280
    lede = re.search(r'class="lede">([^<]*)', html)
    assert lede and gateway in lede.group(1) and "memcached://h:11211" in lede.group(1)


def page_width_at(tmp_path: Path, html: str, width: int, name: str) -> tuple[int, int]:
    """(the page's scrollWidth, the widest table's scrollWidth) at a window ``width`` px
    wide: the page must not scroll sideways; a table may, in its own box."""
    import re

    measure = (
        "<script>window.addEventListener('load', () => { const t = Math.max(0, ...Array.from("
        "document.querySelectorAll('table'), e => e.scrollWidth)); document.body.setAttribute("
        "'data-width', `${document.documentElement.scrollWidth} ${t}`); });</script></body>"
    )
    page = tmp_path / f"{name}-{width}.html"
    page.write_text(html.replace("</body>", measure))
    dom, stderr = chromium(tmp_path, page, f"--window-size={width},2000", "--dump-dom")
    assert console_lines(stderr) == []
    match = re.search(r'data-width="(\d+) (\d+)"', dom)
    assert match, "the measuring script did not run"
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize("width", [800, 1280])
def test_no_page_scrolls_sideways_at_800_or_1280_px(tmp_path: Path, width: int) -> None:
    """The run report's summary ran off an 800 px page (p99.99, max and mean cut): a wide
    table now scrolls inside its own box and the page keeps the window's width."""
    from kvbench.report.html import render
    from tests.support.runs import make_run

    eleven = ("get", "set", "add", "replace", "append", "prepend", "cas", "delete", "incr",
              "decr", "touch")  # fmt: skip
    ops = {op: (123_456_789, 4_000_000 + i) for i, op in enumerate(eleven)}
    runs = [make_run(f"20261201-1200{i}-abcdef", [ops] * 2) for i in range(2)]
    widest = 0
    for name, html in (("run", render(runs[:1])), ("compare", render(runs))):
        page, table = page_width_at(tmp_path, html, width, name)
        assert page <= width, f"{name}: {page} px of page in a {width} px window"
        widest = max(widest, table)
    if width == 800:
        assert widest > width - 60  # a table wider than the column: it scrolls, not the page


def test_eleven_ops_are_eleven_distinct_lines_listed_as_they_end_and_a_short_last_interval_is_left_out(
    tmp_path: Path,
) -> None:
    """A replay's 11 ops shared 8 colours (add/prepend, cas/set looked alike), the legend
    did not follow the lines, and a 9 ms last interval drew a false drop at the end."""
    import dataclasses
    import re

    from kvbench.report.html import render
    from tests.support.runs import S, make_run, round_snap

    eleven = ("add", "append", "cas", "decr", "delete", "get", "gets", "incr", "prepend",
              "replace", "set")  # fmt: skip
    run = make_run("20261201-120000-abcdef", [{}])
    snaps = []
    for k, length_ns in enumerate((S, S, S, 9_000_000)):
        ops = {op: ((i + 1) * 1000 * length_ns // S + 10, 2_000_000) for i, op in enumerate(eleven)}
        snap = round_snap(0, ops)
        snaps.append(dataclasses.replace(snap, index=k, start_ns=k * S, end_ns=k * S + length_ns))
    run.intervals = snaps
    run.window_end_ns = snaps[-1].end_ns
    page = tmp_path / "eleven.html"
    page.write_text(render([run]))
    dom, stderr = chromium(tmp_path, page, "--window-size=1280,2400", "--dump-dom")
    assert console_lines(stderr) == []
    throughput = dom[dom.index('data-chart="throughput"') :]
    throughput = throughput[: throughput.index("</figure>")]
    lines = re.findall(
        r'<path d="([^"]*)" class="series" stroke="([^"]+)"(?: stroke-dasharray="([^"]+)")?',
        throughput,
    )
    styles = {(stroke, dashes) for _, stroke, dashes in lines}
    assert len(lines) == 12 and len(styles) == 12  # 11 ops and all ops, each its own look
    assert all(d.count("L") == 2 for d, _, _ in lines)  # 3 full intervals: the 9 ms one left out
    assert "left out: a last interval of 0.009 s" in throughput
    legend = re.findall(r"<span><svg[^>]*>.*?</svg>([^<]+)</span>", throughput)
    ends = {op: (i + 1) * 1000 + 10 for i, op in enumerate(eleven)}
    assert legend == ["all ops", *sorted(eleven, key=lambda op: -ends[op])]


class HeatmapCells(HTMLParser):
    """Per heatmap (its op): per column its ``data-n`` and its cells' counts and shares."""

    def __init__(self) -> None:
        super().__init__()
        self.maps: dict[str, list[tuple[int, int, list[int], list[float]]]] = {}
        self.marks: list[str] = []
        self._op = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "figure" and a.get("data-chart") == "heatmap":
            self._op = a["data-op"] or ""
            self.maps[self._op] = []
        elif "heat-col" in classes:
            self.maps[self._op].append((int(a["data-n"] or 0), int(a["data-ops"] or 0), [], []))
        elif "heat-cell" in classes:
            _, _, counts, shares = self.maps[self._op][-1]
            counts.append(int(a["data-count"] or 0))
            shares.append(float(a["data-share"] or 0))
        elif "heat-mark" in classes:
            self.marks.append(classes[-1])


def dom_of(tmp_path: Path, page: Path) -> str:
    dom, stderr = chromium(tmp_path, page, "--dump-dom")
    assert console_lines(stderr) == []
    return dom


def check_heatmaps(dom: str, doc: dict[str, Any]) -> HeatmapCells:
    """Every op has its heatmap, drawn from its intervals' histograms: per column the
    cells' counts add up to the column's requests, their shares to 1, and (no interval
    merged) the column's requests are the interval's in the result document."""
    cells = HeatmapCells()
    cells.feed(dom)
    assert sorted(cells.maps) == sorted(doc["ops"])
    for op, columns in cells.maps.items():
        assert len(columns) == len(doc["intervals"])
        for (n, ops, counts, shares), interval in zip(columns, doc["intervals"], strict=True):
            assert sum(counts) == n and (not n or abs(sum(shares) - 1) < 1e-9)
            assert ops == interval["ops"][op]["count"]
            if not doc["totals"]["errors"]:
                assert n == ops
        assert sum(c[1] for c in columns) == doc["ops"][op]["count"]
    return cells


def marked_run() -> Any:
    """A 20-interval run whose server restarted and which lost a connection (a fake)."""
    import dataclasses

    from kvbench.metrics import Histogram, IntervalSnapshot
    from tests.support.runs import S, make_run

    run = make_run("20261202-041500-abcdef", [{}])
    snaps = []
    for k in range(20):
        get, put = Histogram(), Histogram()
        get.record(90_000 + 500 * k, 5000)
        get.record(1_500_000, 40 if k < 12 else 400)  # a tail that grows at 12 s
        put.record(120_000, 800)
        counts = {"get": {"hit": 5040 if k < 12 else 5400}, "set": {"stored": 800}}
        stats = {}
        if k == 7:
            counts["get"]["conn_error"] = 2
            stats = {"reconnects": 1.0}
        snaps.append(
            IntervalSnapshot("measure", k, k * S, (k + 1) * S, counts, {"get": get, "set": put},
                             stats=stats)
        )  # fmt: skip
    samples = [
        {"taken_ns": (k + 1) * S + 1000, "round": 0, "index": k,
         "stats": {"pid": "10" if k < 14 else "11"}}
        for k in range(20)
    ]  # fmt: skip
    return dataclasses.replace(
        run,
        intervals=snaps,
        window_end_ns=20 * S,
        rounds=[{"round": 0, "window_start_ns": 0, "window_end_ns": 20 * S, "status": "ok"}],
        server={"intervals": samples},
    )


@pytest.mark.parametrize("width", [800, 1280])
def test_the_latency_heatmap_renders_and_fits_at_800_and_1280_px(
    tmp_path: Path, width: int
) -> None:
    """One heatmap per op, inside the page at both widths, every cell inside its chart,
    the restart and the lost connection marked in their intervals; the screenshot is kept
    beside the test's files (KVBENCH_SHOTS=dir keeps a copy)."""
    import os
    import re
    import shutil

    from kvbench.report.html import render
    from kvbench.report.json_report import document
    from kvbench.report.summary import summarize

    run = marked_run()
    html = render([run])
    measure = (
        "<script>window.addEventListener('load', () => { const r = Array.from(document."
        "querySelectorAll('figure.heatmap svg'), e => e.getBoundingClientRect()); const c = "
        "Array.from(document.querySelectorAll('figure.heatmap svg'), s => { const w = s.viewBox"
        ".baseVal.width; return Array.from(s.querySelectorAll('rect.heat-cell')).filter(e => "
        "+e.getAttribute('x') < 0 || +e.getAttribute('x') + +e.getAttribute('width') > w + 1)"
        ".length; }); document.body.setAttribute('data-heat', `${document.documentElement."
        "scrollWidth} ${Math.max(...r.map(b => b.right))} ${Math.min(...r.map(b => b.width))} "
        "${c.reduce((a, b) => a + b, 0)} ${r.length}`); });</script></body>"
    )
    page = tmp_path / f"heat-{width}.html"
    page.write_text(html.replace("</body>", measure))
    dom, stderr = chromium(tmp_path, page, f"--window-size={width},2400", "--dump-dom")
    assert console_lines(stderr) == []
    found = re.search(r'data-heat="(\d+) ([\d.]+) ([\d.]+) (\d+) (\d+)"', dom)
    assert found, "the measuring script did not run"
    scroll, right, narrowest, outside, maps = found.groups()
    assert int(maps) == 2 and int(scroll) <= width and float(right) <= width
    assert float(narrowest) >= width - 120  # full width, not squeezed into a grid cell
    assert int(outside) == 0
    cells = check_heatmaps(dom, document(summarize(run)))
    assert (
        sorted(cells.marks) == ["connection", "connection", "restart", "restart"] + ["verdict"] * 2
    )  # two maps: the restart, the lost connection and its errors in each

    shot = tmp_path / f"heat-{width}.png"
    _, stderr = chromium(tmp_path, page, f"--screenshot={shot}", f"--window-size={width},2400")
    assert console_lines(stderr) == []
    shot_width, _, rows = png_rows(shot)
    assert shot_width == width and len(set(rows)) > 200
    if os.environ.get("KVBENCH_SHOTS"):
        shutil.copy(shot, Path(os.environ["KVBENCH_SHOTS"]) / shot.name)


@pytest.mark.parametrize("width", [800, 1280])
def test_a_long_header_breaks_between_its_words_not_inside_one(tmp_path: Path, width: int) -> None:
    """A Redis Cluster run names three masters in the header: at 800 px the run id broke
    inside its digits ("run 2" / "0261205-..."), a port inside its digits, and at 1280 px
    the start time at its hyphen. The run id and the time are each on one line now."""

    from kvbench.report.html import render
    from tests.support.runs import make_run

    run = make_run("20261205-104341-bca5b4", [{"get": (1_000_000, 4_000_000)}] * 2)
    run.targets = [
        {"url": f"redis+cluster://127.0.0.1:{port}", "protocol": "resp2"}
        for port in (37861, 56843, 60683)
    ]
    lines = lines_of(tmp_path, render([run]), ".lede .word", width, "header")
    assert lines == [1, 1]  # the run id, the start time


@pytest.mark.parametrize("width", [800, 1280])
def test_a_flag_in_a_verdict_stays_one_word(tmp_path: Path, width: int) -> None:
    """At 800 px the errors verdict broke '(--max-error-rate)' after '--max-': a flag no
    longer one to copy. A verdict's hyphenated words are kept whole, as a reason's."""
    from kvbench.report.html import render
    from tests.support.runs import make_run

    run = make_run("20261205-124028-58b952", [{"get": (1_000, 100_000)}])
    run.intervals[0].counts["set"] = {"error_reply": 500}
    html = render([run])
    assert "(--max-error-rate)" in html
    lines = lines_of(tmp_path, html, ".verdict .word", width, "verdict")
    assert lines and set(lines) == {1}


def lines_of(tmp_path: Path, html: str, selector: str, width: int, name: str) -> list[int]:
    """How many lines each element ``selector`` finds takes, at a window ``width`` px wide."""
    import re

    measure = (
        "<script>window.addEventListener('load', () => { document.body.setAttribute("
        f"'data-lines', Array.from(document.querySelectorAll('{selector}'), "
        "e => e.getClientRects().length).join(' ')); });</script></body>"
    )
    page = tmp_path / f"{name}-lines-{width}.html"
    page.write_text(html.replace("</body>", measure))
    dom, _ = chromium(tmp_path, page, f"--window-size={width},1400", "--dump-dom")
    match = re.search(r'data-lines="([\d ]*)"', dom)
    assert match, "the measuring script did not run"
    return [int(n) for n in match.group(1).split()]


@pytest.mark.parametrize("width", [800, 1280])
def test_a_search_page_fits_with_each_run_id_whole_and_its_units_as_its_table(
    tmp_path: Path, width: int
) -> None:
    """A search page at 800 px cut its run ids ('2026' of 20261205-114857-b63dcb, the
    table wider than its box) and folded each step's reason into a word a line; the
    reason wrote '1.62ms' beside the table's '1.62 ms'. Each step's run and reason are on
    a row of their own now."""

    from kvbench.report.search_answer import search_document
    from kvbench.report.search_page import render_search
    from tests.unit.report.test_search import SETTINGS, step

    steps = [
        step(i + 1, rate, verdict, run_id=f"20261205-1148{50 + i}-b63dcb")
        for i, (rate, verdict) in enumerate([(40_000, "pass"), (80_000, "fail"), (60_000, "pass")])
    ]
    steps[1]["reason"] = "p99 1.62ms >= 1.00ms"
    doc = search_document(
        "search-20261205-114914-21ca1b", "2026-12-05T11:48:50+00:00", "memcached://h:1",
        ["p99<1ms"], steps, "bracketed", {**SETTINGS, "precision": 0.02, "duration_s": 1.0},
    )  # fmt: skip
    html = render_search(doc)
    assert "p99 1.62\u00a0ms &gt;= 1.00\u00a0ms" in html  # as the p99 column writes 1.62 ms
    page_width, table_width = page_width_at(tmp_path, html, width, "search")
    assert page_width <= width and table_width <= width - 40  # no scrolling, in or out
    lines = lines_of(tmp_path, html, "span.nowrap, .lede .word", width, "search")
    assert lines == [1] * 5  # the search id, its start, 3 run ids
