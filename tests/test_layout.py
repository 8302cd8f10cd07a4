"""The house rules of the source tree: imports point one way (app → render → pipeline),
pipeline imports neither Qt nor OpenGL, and every subpackage says what it holds."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# What each layer must not import (top-level names).
BANNED = {
    "pipeline": {"PySide6", "OpenGL", "render", "app"},
    "render": {"app"},
}


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("layer", sorted(BANNED))
def test_imports_point_one_way(layer):
    wrong = {str(p.relative_to(REPO)): sorted(imported(p) & BANNED[layer])
             for p in (REPO / layer).rglob("*.py")}
    assert {k: v for k, v in wrong.items() if v} == {}


def test_every_subpackage_says_what_it_holds():
    packages = [p for layer in ("app", "render", "pipeline")
                for p in [REPO / layer, *sorted((REPO / layer).glob("*/"))]
                if p.is_dir() and p.name != "__pycache__"]
    assert len(packages) >= 14
    for package in packages:
        init = package / "__init__.py"
        assert init.exists(), f"{package.relative_to(REPO)} is not a package"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 20, f"{init.relative_to(REPO)} says nothing of what it holds"
