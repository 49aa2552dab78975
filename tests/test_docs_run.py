"""Every ```python block of README.md and docs/**/*.md runs (docs/index.md, "Docs that run").

Each page's groups of blocks run in one fresh subprocess (``tests/docs_blocks.py``), each
group in a fresh namespace, a fresh empty folder and a fresh aioflow session, as a user
would paste them, with the repository on ``PYTHONPATH``, no device forced, and offline:
``load_mnist`` serves the bundled digits and any download attempt fails at once. A block
fails its page when it raises, when it leaves an error pending in the session, or when it
shows a warning it is not marked to show. Pages added later are picked up by the glob.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import docs_blocks
from docs_blocks import ROOT, DocsMarkupError, groups, pages

PAGES = [p.relative_to(ROOT).as_posix() for p in pages()]
GROUP_TIMEOUT = 60


def _env(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("AIOFLOW_DEVICE", None)       # tests/conftest.py pins the suite to the CPU
    env.pop("AIOFLOW_DATA_DIR", None)
    env.pop("AIOFLOW_MNIST_FULL", None)
    env.pop("PYTEST_ADDOPTS", None)
    env["AIOFLOW_OFFLINE"] = "1"          # no download attempt: the bundled digits
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        env[var] = "http://127.0.0.1:9"   # and any other attempt fails at once
    env.pop("no_proxy", None)
    env.pop("NO_PROXY", None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")   # not the user's ~/.cache/aioflow
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_groups(todo, tmp_path):
    """Run the groups in one subprocess; returns (results, report of what failed)."""
    spec = {
        "tmp": str(tmp_path / "run"),
        "group_timeout": GROUP_TIMEOUT,
        "groups": [{"page": g.page, "line": g.line,
                    "blocks": [{"line": b.line, "code": b.code, "directives": b.directives,
                                "setup": b.setup, "setup_line": b.setup_line}
                               for b in g.blocks]}
                   for g in todo],
    }
    (tmp_path / "run").mkdir()
    spec_file, result_file = tmp_path / "spec.json", tmp_path / "result.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    try:
        proc = subprocess.run(
            [sys.executable, docs_blocks.__file__, str(spec_file), str(result_file)],
            cwd=tmp_path / "run", env=_env(tmp_path), capture_output=True, text=True,
            timeout=GROUP_TIMEOUT * len(todo) + 30)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        return [], f"the blocks did not finish in time\n{(out or '')[-4000:]}\n{(err or '')[-4000:]}"
    results = json.loads(result_file.read_text()) if result_file.exists() else []
    failed = [r for r in results if not r["ok"]]
    report = "\n\n".join(f"--- {r['where']}\n{r['error']}" for r in failed)
    if len(results) < len(todo):
        done = {r["where"] for r in results}
        missing = [f"{g.page}:{g.line}" for g in todo if f"{g.page}:{g.line}" not in done]
        report += (f"\n\nthe runner stopped (exit code {proc.returncode}) before "
                   f"{', '.join(missing)}\nstdout:\n{proc.stdout[-4000:]}\n"
                   f"stderr:\n{proc.stderr[-6000:]}")
    elif failed:
        report += f"\n\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    elif proc.returncode != 0:
        report = f"the runner exited with {proc.returncode}\n{proc.stderr[-4000:]}"
    return results, report


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", PAGES)
def test_page_blocks_run(page, tmp_path):
    todo = [g for g in groups(ROOT / page) if g.skip is None]
    if not todo:
        return
    results, report = run_groups(todo, tmp_path)
    if report:
        pytest.fail(f"{page}:\n{report}", pytrace=False)
    assert len(results) == len(todo)


def test_every_python_block_runs_or_says_why_not():
    runs, skipped = 0, []
    for page in pages():
        for group in groups(page):
            n = sum(b.lang == "python" for b in group.blocks)
            if group.skip is None:
                runs += n
            else:
                assert group.skip.strip(), f"{group.page}:{group.line}: skip without a reason"
                skipped.append(f"{group.page}:{group.line}: {group.skip}")
    assert runs >= 40, runs
    assert len(skipped) <= 3, skipped   # rare: see docs/index.md, "Docs that run"


# The runner itself: a failing block fails, the conventions do what docs/index.md says.

SAMPLE = '''
# A page

```python
import aioflow as flow
x = 41
```

<!-- docs-test: continue -->
```python
assert x == 41, "continue shares the namespace"
```

```python
assert "x" not in globals(), "a new group starts afresh"
import os
assert os.listdir(".") == [], "in an empty folder"
with open("written.txt", "w") as f:
    f.write("here")
```

<!-- docs-test: skip needs a GPU -->
```python
raise SystemExit("a skipped block must not run")
```

<!-- docs-test: continue -->
```python
raise SystemExit("nor a block continuing it")
```

<!-- docs-test: setup (the download)
payload = "from outside"
-->
```python
assert payload == "from outside"
```

<!-- docs-test: notebook -->
```python
import asyncio
await asyncio.sleep(0)
```

<!-- docs-test: warns UserWarning -->
```python
import warnings
warnings.warn("shown on purpose")
```

<!-- docs-test: file data.txt -->
```text
some data
```

<!-- docs-test: continue -->
```python
with open("data.txt") as f:
    assert f.read() == "some data\\n"
```

```
not python: never run
```
'''


def test_conventions(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(SAMPLE)
    found = groups(page)
    assert [g.skip for g in found] == [None, None, "needs a GPU", None, None, None, None]
    assert [len(g.blocks) for g in found] == [2, 1, 2, 1, 1, 1, 2]
    results, report = run_groups([g for g in found if g.skip is None], tmp_path)
    assert not report, report
    assert [r["ok"] for r in results] == [True] * 6


@pytest.mark.parametrize("code, message", [
    ("raise ValueError('broken docs')", "ValueError: broken docs"),
    ("undefined_name + 1", "NameError"),
    ("import warnings\nwarnings.warn('not marked')", "unexpected warnings"),
    ("import numpy as np, aioflow as flow, aioflow.typing as tp\n"
     "@flow.global_function(type='predict')\n"
     "def job(x: tp.Numpy.Placeholder((2,))) -> tp.Callback[tp.Numpy]:\n"
     "    return x\n"
     "def cb(r):\n"
     "    raise KeyError('never raised by the block')\n"
     "job(np.ones(2, np.float32))(cb)\n",
     "never raised by the block"),
])
def test_a_failing_block_fails(tmp_path, code, message):
    page = tmp_path / "page.md"
    page.write_text(f"```python\n{code}\n```\n\n```python\nprint('the next group runs')\n```\n")
    results, report = run_groups(groups(page), tmp_path)
    assert [r["ok"] for r in results] == [False, True]
    assert message in report and "page.md:2" in report, report


@pytest.mark.parametrize("markup", [
    "<!-- docs-test: continue -->\n```python\npass\n```\n",               # nothing to continue
    "<!-- docs-test: skip -->\n```python\npass\n```\n",                   # no reason
    "<!-- docs-test: sikp typo -->\n```python\npass\n```\n",              # unknown
    "<!-- docs-test: skip why -->\n\nsome text\n\n```python\npass\n```\n",  # not before a fence
    "<!-- docs-test: skip why -->\n```bash\nls\n```\n",                   # not a python block
])
def test_bad_markup_is_refused(tmp_path, markup):
    page = tmp_path / "page.md"
    page.write_text(textwrap.dedent(markup))
    with pytest.raises(DocsMarkupError):
        groups(page)


PYTEST_PAGE = '''
<!-- docs-test: file pyproject.toml -->
```toml
[tool.pytest.ini_options]
asyncio_mode = "auto"
{extra}
```

<!-- docs-test: continue; file conftest.py -->
```python
pytest_plugins = ["aioflow.testing"]
```

<!-- docs-test: continue; pytest test_it.py -->
```python
async def test_it(flow_session):
    assert flow_session is not None
```
'''


@pytest.mark.parametrize("extra, clean", [
    ("", False),   # pytest-asyncio 1.x warns on stderr, outside pytest's summary line
    ('asyncio_default_fixture_loop_scope = "function"', True),   # the documented set-up
])
def test_a_pytest_block_fails_on_any_warning_in_pytests_output(tmp_path, extra, clean):
    page = tmp_path / "page.md"
    page.write_text(PYTEST_PAGE.format(extra=extra))
    results, report = run_groups(groups(page), tmp_path)
    assert [r["ok"] for r in results] == [clean], report
    if not clean:
        assert "passed with warnings" in report and "asyncio_default_fixture_loop_scope" in report


def test_warnings_are_found_anywhere_in_pytests_output():
    assert docs_blocks.pytest_warnings("1 passed in 0.1s\n") == []
    assert docs_blocks.pytest_warnings("x.py:3: PytestDeprecationWarning: old\n1 passed\n")
    assert docs_blocks.pytest_warnings("1 passed, 2 warnings in 0.1s")
    assert docs_blocks.pytest_warnings("=== warnings summary ===")


def test_the_index_links_every_page_and_names_every_example():
    """docs/index.md is where a reader starts: a page or an example it does not lead to is
    one a newcomer will not find."""
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    pages_missing = [p.name for p in sorted((ROOT / "docs").glob("*.md"))
                     if p.name != "index.md" and f"]({p.name}" not in index]
    examples_missing = [p.name for p in sorted((ROOT / "examples").glob("*.py"))
                        if f"`{p.name}`" not in index]
    assert pages_missing == [] and examples_missing == [], (pages_missing, examples_missing)
