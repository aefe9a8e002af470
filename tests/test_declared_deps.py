"""Every package the code imports is one that ``pyproject.toml`` declares (issue: the README's test
command failed in a fresh venv because the tests imported pandas, which nothing declared).

CI runs in a fresh virtual environment (``.ci/run``), so an undeclared import also turns CI red
there; this test names the culprit at once, and also catches an import the suite never executes.
It reads every ``import`` with ``ast`` and maps each top-level module to its distribution with
``importlib.metadata``:

- the package, its tests and examples may use the runtime dependencies and the ``dev`` extra;
- ``benchmarks/`` may also use the ``bench`` extra;
- an import of a package that is not installed must sit in a ``try`` that catches
  ``ImportError`` (an optional peer that no extra installs, such as chantilly's dill), or be
  declared in an extra that is not installed here (capymoa and its Java bridge, ``bench``).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_PARTY = {"app", "ensembles", "learners", "tests", "benchmarks", "examples"}
# import names whose distribution is not installed here, so importlib.metadata cannot map them
NOT_INSTALLED = {"jpype": "jpype1", "capymoa": "capymoa"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return md.packages_distributions()


@functools.cache
def _declared() -> dict[str, set[str]]:
    """Declared distributions (normalised names) of the runtime and of each extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {_norm(re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0]) for r in reqs}

    out = {"runtime": names(project["dependencies"])}
    for extra, reqs in project["optional-dependencies"].items():
        out[extra] = names(reqs)
    return out


def _guarded(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside a ``try`` whose handlers catch ImportError."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = " ".join(ast.unparse(h.type) for h in node.handlers if h.type is not None)
        if "ImportError" in caught or "ModuleNotFoundError" in caught or "Exception" in caught:
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        lines.add(sub.lineno)
    return lines


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """(line, top-level module, guarded) for each absolute import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    guarded = _guarded(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            mods = [node.module]
        else:
            continue
        for mod in mods:
            found.append((node.lineno, mod.split(".")[0], node.lineno in guarded))
    return found


def _local_modules(folder: Path) -> set[str]:
    """Modules a folder's scripts import by bare name (pytest and ``python benchmarks/x.py`` put
    the folder on sys.path)."""
    return {p.stem for p in folder.rglob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}


def _file_problems(path: Path, allowed: set[str], local: set[str]) -> list[str]:
    """What is wrong with ``path``'s imports, given the distributions it may use."""
    dists = _distributions()
    everything = set().union(*_declared().values())
    problems = []
    for line, mod, guarded in _imports(path):
        if mod in sys.stdlib_module_names or mod in FIRST_PARTY or mod in local:
            continue
        owners = {_norm(d) for d in dists.get(mod, [])}
        if not owners and mod in NOT_INSTALLED:
            owners = {NOT_INSTALLED[mod]}
        where = f"{path.name}:{line} imports {mod}"
        if not owners:
            if not guarded:
                problems.append(f"{where}: no installed distribution provides it")
        elif not owners & allowed and not (guarded and owners & everything):
            problems.append(f"{where} ({', '.join(sorted(owners))}): not declared")
    return problems


def test_every_import_is_declared() -> None:
    declared = _declared()
    problems = []
    for top in ("app", "ensembles", "learners", "tests", "examples", "benchmarks"):
        allowed = declared["runtime"] | declared["dev"]
        if top == "benchmarks":
            allowed |= declared["bench"]
        local = _local_modules(ROOT / top)
        if top == "benchmarks":  # some benchmarks reuse the tests' helpers (a real Redis Cluster)
            local |= _local_modules(ROOT / "tests")
        for path in sorted((ROOT / top).rglob("*.py")):
            problems += [f"{top}/{p}" for p in _file_problems(path, allowed, local)]
    assert not problems, "\n".join(problems)


def test_the_check_finds_an_undeclared_import(tmp_path: Path) -> None:
    """The check is not vacuous: pluggy (installed, pytest's, never declared by us) and an
    unguarded import of a package nobody installed are reported; a guarded one is not."""
    src = tmp_path / "probe.py"
    src.write_text(
        "import os\nimport numpy\nimport pluggy\nimport nosuchthing\n"
        "try:\n    import nosuchthing2\nexcept ImportError:\n    pass\n"
    )
    declared = _declared()
    problems = _file_problems(src, declared["runtime"] | declared["dev"], set())
    assert [p.split(" imports ")[1].split()[0].rstrip(":") for p in problems] == [
        "pluggy",
        "nosuchthing",
    ], problems


def test_the_conformance_suite_without_pandas_or_scikit_learn() -> None:
    """``learners.checks`` is published for third parties, who may have neither: without pandas
    its pandas check is skipped (no DataFrame can reach the model), and without scikit-learn
    river's ``check_estimator`` (which imports it) is refused with an error saying what to do."""
    code = (
        "import sys\n"
        "sys.modules['pandas'] = None\n"
        "sys.modules['sklearn'] = None\n"
        "from learners import NaiveBayes\n"
        "from learners.checks import check_learner, yield_checks\n"
        "names = [c.__name__ for c in yield_checks(NaiveBayes())]\n"
        "assert 'check_pandas_batches' not in names and 'check_batch_equals_row_by_row' in names\n"
        "check_learner(NaiveBayes(), river=False)\n"
        "try:\n"
        "    check_learner(NaiveBayes())\n"
        "except ImportError as e:\n"
        "    print('refused:', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    assert "refused: river's check_estimator imports scikit-learn" in out.stdout
