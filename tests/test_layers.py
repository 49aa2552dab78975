"""aioflow's layers (docs/architecture.md): imports go one way, with no circle.

The layers contract itself is import-linter's (``[tool.importlinter]`` in pyproject.toml,
run by ``lint-imports`` in .ci/run and below); these tests add what it does not check:
no import circle anywhere among aioflow's modules, ``import aioflow`` without any optional
dependency, and a reason beside every import of aioflow's own modules made inside a
function.
"""
from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

import pytest

grimp = pytest.importorskip("grimp", reason="import-linter is not installed (pip install -e '.[test]')")

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "aioflow"


def _strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("aioflow", exclude_type_checking_imports=True)
    edges = {}
    for module in graph.modules:
        # a module importing its own package (``from . import x`` in a submodule) is the
        # package's initialisation, not an edge of a circle
        edges[module] = {t for t in graph.find_modules_directly_imported_by(module)
                         if t in graph.modules and t != module
                         and not module.startswith(t + ".")}
    return edges


def test_the_circle_finder_finds_a_circle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_aioflows_modules():
    # Imports inside functions count: a circle they hide is still a circle.
    circles = _strongly_connected(_import_graph())
    assert circles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


@pytest.mark.skipif(shutil.which("lint-imports") is None and
                    not (pathlib.Path(sys.executable).parent / "lint-imports").exists(),
                    reason="import-linter's lint-imports is not installed")
def test_the_layers_contract_holds():
    exe = pathlib.Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(exe) if exe.exists() else "lint-imports"],
                            cwd=PACKAGE.parent, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


OPTIONAL = ["cupy", "google", "PIL", "mpi4py", "mpich", "starlette", "uvicorn", "httptools",
            "orjson", "tensorboardX", "tensorboard", "flatbuffers", "xxhash", "tqdm",
            "matplotlib", "trio", "torch", "cv2"]


def test_aioflow_imports_without_its_optional_dependencies():
    # Only numpy, threadpoolctl and anyio are required (pyproject.toml); an optional one
    # imported at module level by a module that `import aioflow` loads would break a bare
    # install, and the suite (with every extra installed) would not notice.
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in OPTIONAL)
    code = f"import sys\n{blocked}import aioflow, aioflow.typing\nprint('ok')\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=PACKAGE.parent)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def _lazy_internal_imports():
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                internal = (isinstance(node, ast.ImportFrom) and
                            (node.level > 0 or (node.module or "").startswith("aioflow")))
                if internal:
                    yield path, node.lineno, lines[node.lineno - 1], lines[node.lineno - 2]


def test_every_import_inside_a_function_says_why():
    # Once the circles are gone an internal import belongs at the top of its module; one
    # stays inside a function only for a reason the next reader must see: the module it
    # loads needs an optional dependency, or costs start-up time most programs never pay.
    silent = [f"{path.relative_to(PACKAGE.parent)}:{lineno}: {line.strip()}"
              for path, lineno, line, above in _lazy_internal_imports()
              if "#" not in line and not above.strip().startswith("#")]
    assert silent == [], "imports inside functions without a reason:\n" + "\n".join(silent)
