"""The public namespaces only re-export (issue 23): definitions live below them.

``flow.math``, ``flow.nn``, ``flow.layers``, ``flow.losses`` and ``flow.regularizers`` are
re-export modules, as JAX's public modules are: a docstring, ``from <module below> import
x as x`` lines and an explicit ``__all__``, nothing else. For each of them the tests check

* the source: no statement but the docstring, the imports and ``__all__``, and every
  imported name re-exported under its own name (``x as x``);
* ``__all__``: exactly the module's public names, each once;
* each function and class it offers is defined below the public namespaces (its
  ``__module__`` is an internal module such as ``aioflow.oneflow_ops.math_api``);
* every name that ``docs/api/oneflow_names.txt`` lists under the namespace is offered
  (unless ``docs/api/oneflow_missing.txt`` says it is not yet).

The root package ``aioflow`` re-exports too: the functions and classes it offers come
from internal modules, not from another public namespace, and every top-level name of
OneFlow's list is there.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pathlib

import pytest

import aioflow as flow

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"

# The namespaces that are re-export modules, by their name under ``flow``.
REEXPORT_NAMESPACES = ["math", "nn", "layers", "losses", "regularizers", "image", "detection"]

# Every public namespace module: a re-exported object must not be defined in one of them.
PUBLIC_MODULES = {"aioflow"} | {f"aioflow.{ns}" for ns in REEXPORT_NAMESPACES}

# Defined in ``aioflow/__init__.py`` itself: none.
ROOT_DEFINITIONS: set[str] = set()


def _names(path: pathlib.Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


ONEFLOW_NAMES = _names(API / "oneflow_names.txt")
MISSING = set(_names(API / "oneflow_missing.txt"))


def _oneflow_names_under(namespace: str | None) -> list[str]:
    """The names OneFlow exported directly under ``flow.<namespace>`` (None: ``flow``),
    less those aioflow lists as missing."""
    out = []
    for full in ONEFLOW_NAMES:
        if full in MISSING:
            continue
        head, _, tail = full.rpartition(".")
        if (head or None) == namespace:
            out.append(tail)
    return out


def _public_names(module) -> set[str]:
    return {n for n in vars(module) if not n.startswith("_")}


def _defining_module(obj) -> str | None:
    """The module that defines a function or class (None for other objects)."""
    if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj):
        return obj.__module__
    return None


@pytest.mark.parametrize("namespace", REEXPORT_NAMESPACES)
def test_source_only_reexports(namespace):
    module = importlib.import_module(f"aioflow.{namespace}")
    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    body = tree.body
    assert body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str), f"flow.{namespace}: no module docstring"
    offenders, renamed = [], []
    for node in body[1:]:
        if isinstance(node, ast.ImportFrom):
            renamed += [a.name for a in node.names if a.asname != a.name]
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] \
                == ["__all__"] and isinstance(node.value, (ast.List, ast.Tuple)):
            continue
        else:
            offenders.append(f"line {node.lineno}: {ast.dump(node)[:80]}")
    assert not offenders, (f"flow.{namespace} must only re-export (a docstring, "
                           f"'from ... import x as x' and __all__): {offenders}")
    assert not renamed, (f"flow.{namespace}: re-export each name as itself "
                         f"('from ... import x as x'): {renamed}")


@pytest.mark.parametrize("namespace", REEXPORT_NAMESPACES)
def test_all_lists_exactly_the_public_names(namespace):
    module = importlib.import_module(f"aioflow.{namespace}")
    listed = getattr(module, "__all__", None)
    assert listed is not None, f"flow.{namespace} has no __all__"
    assert len(set(listed)) == len(listed), f"flow.{namespace}.__all__ repeats names"
    public = _public_names(module)
    assert set(listed) == public, (
        f"flow.{namespace}: not in __all__: {sorted(public - set(listed))}; "
        f"in __all__ but absent: {sorted(set(listed) - public)}")


@pytest.mark.parametrize("namespace", REEXPORT_NAMESPACES)
def test_definitions_live_below(namespace):
    module = importlib.import_module(f"aioflow.{namespace}")
    misplaced = {}
    for name in getattr(module, "__all__", sorted(_public_names(module))):
        where = _defining_module(getattr(module, name))
        if where is not None and (where in PUBLIC_MODULES or not where.startswith("aioflow.")):
            misplaced[name] = where
    assert not misplaced, (f"flow.{namespace} offers names defined in a public namespace "
                           f"rather than below one: {misplaced}")


@pytest.mark.parametrize("namespace", REEXPORT_NAMESPACES)
def test_oneflow_names_are_offered(namespace):
    module = importlib.import_module(f"aioflow.{namespace}")
    listed = set(getattr(module, "__all__", ()))
    absent = [n for n in _oneflow_names_under(namespace) if n not in listed]
    assert not absent, (f"docs/api/oneflow_names.txt names under flow.{namespace} that its "
                        f"__all__ does not offer: {absent}")


def test_root_reexports_from_below():
    misplaced = {}
    for name in flow.__all__:
        where = _defining_module(getattr(flow, name))
        if where is None or name in ROOT_DEFINITIONS:
            continue
        if where in PUBLIC_MODULES or not where.startswith("aioflow."):
            misplaced[name] = where
    assert not misplaced, (f"flow offers names defined in a public namespace rather than "
                           f"below one: {misplaced}")
    defined_here = {n for n in flow.__all__ if _defining_module(getattr(flow, n)) == "aioflow"}
    assert defined_here == ROOT_DEFINITIONS, (
        f"aioflow/__init__.py defines {sorted(defined_here)}; only "
        f"{sorted(ROOT_DEFINITIONS)} may live there")


def test_root_all_and_oneflow_names():
    # Submodules are left out: importing one later (aioflow.serving) sets an attribute.
    names = {n for n in _public_names(flow) if not inspect.ismodule(getattr(flow, n))}
    assert names <= set(flow.__all__), f"not in flow.__all__: {sorted(names - set(flow.__all__))}"
    absent = [n for n in _oneflow_names_under(None) if n not in set(flow.__all__)]
    assert not absent, f"docs/api/oneflow_names.txt names that flow does not offer: {absent}"
