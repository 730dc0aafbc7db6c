"""The docs stay true: examples load, every command has help with an example, README
starts with the two set-up commands and links every page of docs/, docs/options.md lists
every run option."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from kvbench.cli import cli
from kvbench.config import load_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.toml")), ids=lambda p: p.name)
def test_example_scenarios_load(path: Path) -> None:
    config = load_config(str(path), {}, default_processes=1)
    assert config.targets


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_has_help_with_an_example(name: str) -> None:
    command = cli.commands[name]
    assert command.help and "Example:" in command.help


def test_readme_starts_with_make_run_and_make_test() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = readme.split("```")[1]
    assert "make run" in first_block and "make test" in first_block


def test_the_options_page_documents_every_run_option() -> None:
    page = (ROOT / "docs" / "options.md").read_text()
    run = cli.commands["run"]
    for param in run.params:
        if isinstance(param, click.Option):
            assert any(opt in page for opt in param.opts), param.opts


def test_the_readme_is_a_front_page_that_links_every_doc() -> None:
    """The what and why, make run / make test, examples and the table of docs: under
    12 KB, the reference on pages of their own, each linked."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 12 * 1024
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in readme, page.name


def test_presets_doc_covers_every_preset() -> None:
    from kvbench.config.presets import PRESETS

    text = (ROOT / "docs" / "presets.md").read_text()
    for name in PRESETS:
        assert f"## {name}" in text and f"--preset {name}" in text


def test_run_outputs_stay_out_of_the_repository() -> None:
    """A result written at the root (``--json out.json``, ``kvbench report``'s report.html)
    is ignored, and none is tracked (an ``out2.json`` was)."""
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = ["out.json", "report.html", "run.hlog", "series.csv"]
    ignored = subprocess.run(
        ["git", "check-ignore", *outputs], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert ignored == outputs
    tracked = subprocess.run(
        ["git", "ls-files", "*.json", "*.html", "*.csv", "*.hlog"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert [path for path in tracked if "/" not in path] == []
