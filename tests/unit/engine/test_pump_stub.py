"""engine/_pump.pyi names exactly what the built extension exports.

mypy checks the callers of the compiled pump against the stub (``mypy --strict``), so a
name the C side adds, renames or drops must be in the stub too: read with ``ast``, its
module-level constants, functions and classes, and each class's methods and attributes,
are compared with ``dir()`` of the built module and of its classes.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from tests.support import pump_oracle

STUB = Path(__file__).resolve().parents[3] / "src" / "kvbench" / "engine" / "_pump.pyi"


def public(names: Any) -> set[str]:
    return {name for name in names if not name.startswith("_")}


def stub_names() -> tuple[set[str], dict[str, set[str]]]:
    """The stub's public module names, and each class's public members."""
    tree = ast.parse(STUB.read_text(), str(STUB))
    module: set[str] = set()
    classes: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            module.add(node.target.id)
        elif isinstance(node, ast.Assign):
            module.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.FunctionDef):
            module.add(node.name)
        elif isinstance(node, ast.ClassDef):
            module.add(node.name)
            members = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            classes[node.name] = public(members)
    return public(module), classes


def test_the_stub_names_exactly_what_the_module_exports() -> None:
    pump_oracle.require_compiled()
    from kvbench.engine import _pump

    module, classes = stub_names()
    assert module == public(dir(_pump))
    for name, members in classes.items():
        cls = getattr(_pump, name)
        assert isinstance(cls, type)
        assert members == public(dir(cls)) - public(dir(object)), name


def test_the_stub_ships_with_the_package() -> None:
    """pyproject's package-data lists it: an installed kvbench is typed for its users."""
    pyproject = STUB.parents[3] / "pyproject.toml"
    assert '"engine/_pump.pyi"' in pyproject.read_text()
