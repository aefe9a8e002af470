"""The layering of ARCHITECTURE §1, read from the sources with ``ast``: ``app -> ensembles ->
learners``, nothing backwards, no package reaching into another's ``_private`` modules, and no
import cycle between modules (deferred imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("learners", "ensembles", "app")
ALLOWED = {"learners": set(), "ensembles": {"learners"}, "app": {"learners", "ensembles"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; ``from m import name`` gives ``m.name``
    too, which counts only when it is a module)."""
    mod = module_name(path)
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return out


def graph() -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p): p for p in files}
    return {m: {i for i in imports_of(p) if i in modules} for m, p in modules.items()}


def test_imports_flow_one_way():
    bad = []
    for mod, deps in graph().items():
        top = mod.split(".")[0]
        for dep in deps:
            other = dep.split(".")[0]
            if other != top and other not in ALLOWED[top]:
                bad.append(f"{mod} imports {dep}")
    assert not bad, "layering broken (app -> ensembles -> learners):\n" + "\n".join(sorted(bad))


def test_no_reaching_into_another_packages_private_modules():
    bad = []
    for mod, deps in graph().items():
        top = mod.split(".")[0]
        for dep in deps:
            parts = dep.split(".")
            if parts[0] != top and any(p.startswith("_") for p in parts[1:]):
                bad.append(f"{mod} imports {dep}")
    assert not bad, "private modules used across packages:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    g = graph()
    for deps in g.values():  # importing a.b.c imports the packages a and a.b first: not a cycle
        deps -= {d for d in list(deps) if any(m.startswith(d + ".") for m in g)}
    state: dict[str, int] = {}
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(g[m]):
            if state.get(d) == 1:
                cycles.append(" -> ".join(path[path.index(d) :] + [d]))
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("source", ["from . import b", "from .b import c", "import a.b"])
def test_the_parser_sees_each_form_of_import(tmp_path, monkeypatch, source):
    pkg = tmp_path / "a"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(source + "\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert "a.b" in imports_of(pkg / "m.py")
