"""The import directions of STYLE.md §1, checked by walking every module's imports.

A package may import only what its row allows; nothing imports ``cli``. ``errors`` and
``units`` are leaves every layer may use. Inside a package the imports form no cycle,
counting every import: at module level, inside functions and under ``TYPE_CHECKING``
(an import hidden in a function is still a dependency, only a later one). In ``cli`` a
command module imports no other command module: they share the orchestration in
``cli/session.py`` and the option and output helpers beside it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "kvbench"
LEAVES = {"errors", "units", "__init__"}
# STYLE.md §1's table, row by row.
ALLOWED: dict[str, set[str]] = {
    "protocols": set(),
    "config": set(),
    "metrics": set(),
    "workload": {"config", "protocols"},
    "engine": {"workload", "protocols", "metrics", "config"},
    "results": {"metrics", "config"},
    "runner": {"engine", "metrics", "results", "config"},
    "report": {"results", "metrics"},
    "cli": {"protocols", "config", "metrics", "workload", "engine", "results", "runner", "report"},
}
# Modules allowed beyond their package's row, each with the reason.
EXCEPTIONS: dict[str, tuple[set[str], str]] = {
    # The side connection (preflight, server stats, a queue's backlog) speaks the codecs
    # over a blocking socket, outside any event loop: the engine's drivers have no use
    # for it, and the requests it sends are the protocols' (stats, INFO, LLEN).
    "runner/probe.py": ({"protocols"}, "the side connection speaks the codecs"),
    "runner/queue_probe.py": ({"protocols"}, "the side connection speaks the codecs"),
    # Redis Cluster discovery asks CLUSTER SHARDS (protocols) on the probe's side
    # connection and builds the slot map the workers place keys by (workload.slots).
    "runner/redis_cluster.py": ({"protocols", "workload"}, "cluster discovery"),
}


def imported_modules(path: Path, package: str | None = None) -> set[str]:
    """Every ``kvbench...`` module ``path`` imports anywhere in it (functions and
    ``TYPE_CHECKING`` blocks included), as dotted names; ``from kvbench.x import y``
    names ``kvbench.x.y`` when y is a module, else ``kvbench.x``.

    Args:
        package: the module's package (for relative imports); default: from its path.
    """
    tree = ast.parse(path.read_text(), str(path))
    if package is None:
        package = ".".join(("kvbench", *path.relative_to(SRC).with_suffix("").parts[:-1]))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package up
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if _module_path(name) is not None else base)
    return {name for name in found if name.split(".")[0] == "kvbench"}


def _module_path(name: str) -> Path | None:
    """The file of module ``name`` (a compiled one: its source or built file), or None."""
    parts = name.split(".")[1:]
    if not parts:
        return None
    package = SRC.joinpath(*parts, "__init__.py")
    if package.exists():
        return package
    return next(iter(sorted(SRC.joinpath(*parts[:-1]).glob(parts[-1] + ".*"))), None)


def kvbench_imports(path: Path) -> set[str]:
    """The top-level kvbench packages a module imports (``kvbench.engine.x`` -> ``engine``)."""
    return {name.split(".")[1] for name in imported_modules(path) if name.count(".") >= 1}


def modules() -> list[tuple[str, Path]]:
    return [
        (path.relative_to(SRC).parts[0], path)
        for path in sorted(SRC.rglob("*.py"))
        if len(path.relative_to(SRC).parts) > 1
    ]


def _name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(("kvbench", *parts))


def package_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    paths = sorted((SRC / package).rglob("*.py"))
    names = {_name(p) for p in paths}
    return {_name(p): imported_modules(p) & names - {_name(p)} for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _packages() -> Iterator[str]:
    return (p.name for p in sorted(SRC.iterdir()) if p.is_dir() and not p.name.startswith("__"))


@pytest.mark.parametrize(("package", "path"), modules(), ids=lambda v: str(v))
def test_package_imports_only_what_its_layer_allows(package: str, path: Path) -> None:
    where = str(path.relative_to(SRC))
    allowed = ALLOWED[package] | LEAVES | {package} | EXCEPTIONS.get(where, (set(), ""))[0]
    illegal = kvbench_imports(path) - allowed
    assert not illegal, f"{where} imports {sorted(illegal)}"


@pytest.mark.parametrize("package", list(_packages()))
def test_no_import_cycle_inside_a_package(package: str) -> None:
    found = cycles(package_graph(package))
    assert not found, f"import cycles in {package}: {found}"


def _command_modules() -> set[str]:
    """The cli modules that define click commands."""
    return {
        _name(path)
        for path in (SRC / "cli").glob("*.py")
        if "@click.command" in path.read_text() or "@click.group" in path.read_text()
    } - {"kvbench.cli"}


def test_cli_command_modules_import_no_other_command_module() -> None:
    commands = _command_modules()
    graph = package_graph("cli")
    crossing = {m: sorted(graph[m] & commands) for m in commands if graph[m] & commands}
    assert not crossing, f"command modules importing each other: {crossing}"


def test_every_package_has_a_rule() -> None:
    assert set(_packages()) == set(ALLOWED)


def test_every_exception_names_a_module_that_exists() -> None:
    assert all((SRC / where).exists() for where in EXCEPTIONS)


def test_the_walker_sees_imports() -> None:
    """Guard against a walker that finds nothing and so passes everything."""
    assert "protocols" in kvbench_imports(SRC / "engine" / "connection.py")
    assert "engine" in kvbench_imports(SRC / "runner" / "coordinator.py")


def test_the_cycle_finder_sees_hidden_imports(tmp_path: Path) -> None:
    """A cycle closed only by an import inside a function, or under TYPE_CHECKING, is one."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kvbench.engine.worker import Worker\n"
        "def f():\n    from kvbench.runner import probe\n"
    )
    module = tmp_path / "hidden.py"
    module.write_text(source)
    found = imported_modules(module, "kvbench.engine")
    assert {"kvbench.engine.worker", "kvbench.runner.probe"} <= found
