"""How much of OneFlow v0.3.4's lazy API aioflow offers, pinned honestly (issue 18).

``docs/api/oneflow_names.txt`` lists the 397 names OneFlow v0.3.4 exported for lazy mode;
``docs/api/oneflow_missing.txt`` the ones aioflow does not offer yet. The tests fail when:

* a name not listed as missing does not resolve on ``aioflow`` (a regression), or is not
  documented in docs/api/ (written ``flow.<name>`` in one of its pages);
* a name listed as missing resolves (then remove it from the missing list and document
  it: the list only shrinks by someone saying so);
* the missing list names something that is not in OneFlow's list.

The coverage is printed (``pytest -s``) and recorded in docs/porting.md.
"""
from __future__ import annotations

import pathlib
import re

import pytest

import aioflow as flow

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api"


def _names(path: pathlib.Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


NAMES = _names(API / "oneflow_names.txt")
MISSING = _names(API / "oneflow_missing.txt")


def resolves(name: str) -> bool:
    """``flow.<name>`` exists (attribute by attribute: ``nn.MSELoss`` is flow.nn.MSELoss)."""
    obj = flow
    for part in name.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _documented_names() -> str:
    return "\n".join(p.read_text() for p in sorted(API.glob("*.md")))


def test_the_lists_are_well_formed():
    assert len(NAMES) == 397 and len(set(NAMES)) == len(NAMES)
    assert len(set(MISSING)) == len(MISSING), "a name is listed twice as missing"
    unknown = sorted(set(MISSING) - set(NAMES))
    assert not unknown, f"oneflow_missing.txt names that OneFlow did not export: {unknown}"


def test_names_listed_as_missing_do_not_resolve():
    now_there = [n for n in MISSING if resolves(n)]
    assert not now_there, (
        f"these names resolve now: remove them from docs/api/oneflow_missing.txt and "
        f"document them in docs/api/: {now_there}")


def test_every_other_name_resolves():
    absent = [n for n in NAMES if n not in set(MISSING) and not resolves(n)]
    assert not absent, (f"these OneFlow names do not resolve on aioflow (add them to "
                        f"docs/api/oneflow_missing.txt if dropped on purpose): {absent}")


def test_every_offered_name_is_documented():
    docs = _documented_names()
    undocumented = [n for n in NAMES if n not in set(MISSING)
                    and not re.search(r"flow\." + re.escape(n) + r"(?![\w.])", docs)]
    assert not undocumented, f"document these names in docs/api/ as flow.<name>: {undocumented}"


def test_porting_page_records_the_coverage():
    offered = len(NAMES) - len(MISSING)
    print(f"\nOneFlow v0.3.4 lazy API: {offered} of {len(NAMES)} names resolve on aioflow "
          f"({100 * offered / len(NAMES):.0f}%); {len(MISSING)} missing")
    page = (ROOT / "docs" / "porting.md").read_text()
    assert f"{offered} of {len(NAMES)}" in page, (
        f"docs/porting.md should state the coverage as '{offered} of {len(NAMES)}'")


@pytest.mark.parametrize("name", ["nn.conv2d", "optimizer.SGD", "typing.Numpy"])
def test_resolves_follows_attributes(name):
    assert resolves(name)
    assert not resolves(name + "_no_such_thing")
