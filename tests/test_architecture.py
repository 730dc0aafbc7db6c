"""The import directions of STYLE.md §1, checked by walking every module's imports.

A package may import only what its row allows; nothing imports ``cli``. ``errors`` and
``units`` are leaves every layer may use.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "kvbench"
LEAVES = {"errors", "units", "__init__"}
ALLOWED: dict[str, set[str]] = {
    "protocols": set(),
    "config": set(),
    "metrics": set(),
    "workload": {"config", "protocols"},
    "engine": {"workload", "protocols", "metrics", "config"},
    "results": {"metrics", "config"},
    "runner": {"engine", "metrics", "results", "config", "workload", "protocols"},
    "report": {"results", "metrics"},
    "cli": {"protocols", "config", "metrics", "workload", "engine", "results", "runner", "report"},
}


def kvbench_imports(path: Path) -> set[str]:
    """The top-level kvbench packages a module imports (``kvbench.engine.x`` -> ``engine``)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "kvbench" and len(parts) > 1:
                found.add(parts[1])
    return found


def modules() -> list[tuple[str, Path]]:
    return [
        (path.relative_to(SRC).parts[0], path)
        for path in sorted(SRC.rglob("*.py"))
        if len(path.relative_to(SRC).parts) > 1
    ]


@pytest.mark.parametrize(("package", "path"), modules(), ids=lambda v: str(v))
def test_package_imports_only_what_its_layer_allows(package: str, path: Path) -> None:
    allowed = ALLOWED[package] | LEAVES | {package}
    illegal = kvbench_imports(path) - allowed
    assert not illegal, f"{path.relative_to(SRC)} imports {sorted(illegal)}"


def test_every_package_has_a_rule() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert packages == set(ALLOWED)


def test_the_walker_sees_imports() -> None:
    """Guard against a walker that finds nothing and so passes everything."""
    assert "protocols" in kvbench_imports(SRC / "engine" / "connection.py")
    assert "engine" in kvbench_imports(SRC / "runner" / "coordinator.py")
