"""The ```python blocks of README.md and docs/**/*.md: parsing, and running them.

``tests/test_docs_run.py`` parses every page with :func:`parse_page` and runs each page's
blocks in one subprocess (``python tests/docs_blocks.py SPEC RESULT``, see :func:`main`).
The conventions a page may use are documented in docs/index.md, "Docs that run". In short,
an HTML comment on the lines just before a fence (invisible on GitHub) says how to run it::

    <!-- docs-test: continue -->          continues the previous python block: same
                                          namespace, same folder
    <!-- docs-test: skip REASON -->       not run; the reason is required
    <!-- docs-test: file NAME -->         (any language) written to NAME in the group's
                                          folder, not run
    <!-- docs-test: pytest NAME -->       written to NAME, then `python -m pytest NAME`
                                          runs in the group's folder and must pass
    <!-- docs-test: notebook -->          a Jupyter cell: top-level `await` allowed,
                                          run inside an asyncio event loop
    <!-- docs-test: warns CATEGORY -->    the block shows a warning of that category on
                                          purpose (other warnings fail it)
    <!-- docs-test: setup                 hidden code, run just before the next block in
    CODE                                  its namespace: only to provide what the page
    -->                                   says comes from outside (a downloaded file)

Several directives may share one comment, separated by ``;``.  Every other ```python
block starts a group of its own, run in a fresh namespace and a fresh empty folder.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

DIRECTIVE = re.compile(r"<!--\s*docs-test:(.*?)-->", re.S)
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
# A warning anywhere in pytest's output: its summary ("1 passed, 1 warning"), the
# "warnings summary" section, or a warning a plugin printed to stderr at start-up
# (pytest-asyncio's PytestDeprecationWarning never reaches the summary).
_WARNING_IN_OUTPUT = re.compile(r"\b\w*Warning\b|warnings summary|\b\d+ warnings?\b")


def pytest_warnings(output: str) -> list[str]:
    """The lines of a pytest run's stdout + stderr that show a warning."""
    return [line for line in output.splitlines() if _WARNING_IN_OUTPUT.search(line)]


KNOWN = {"continue", "skip", "file", "pytest", "notebook", "warns", "setup"}


@dataclasses.dataclass
class Block:
    line: int                 # 1-based line of the block's first code line
    lang: str
    code: str
    directives: dict          # name -> argument ('' when none)
    setup: str = ""
    setup_line: int = 0

    @property
    def runs(self) -> bool:
        return self.lang == "python" or "file" in self.directives or "pytest" in self.directives


@dataclasses.dataclass
class Group:
    page: str
    blocks: list
    skip: str | None = None   # the reason, when the group does not run

    @property
    def line(self) -> int:
        return self.blocks[0].line


class DocsMarkupError(ValueError):
    pass


def pages() -> list[Path]:
    """README.md and every docs/**/*.md, in a stable order."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def _directives(comment: str, where: str) -> tuple[dict, str]:
    """The directives of one ``docs-test:`` comment and its setup code, if any."""
    body = comment.strip("\n")
    if body.lstrip().startswith("setup"):
        head, _, code = body.lstrip().partition("\n")   # 'setup (a note)' + code
        if head.split()[0] != "setup" or not code.strip():
            raise DocsMarkupError(f"{where}: 'setup' takes code on the lines after it")
        return {}, code
    found = {}
    for part in body.split(";"):
        part = part.strip()
        if not part:
            continue
        name, _, arg = part.partition(" ")
        arg = arg.strip()
        if name not in KNOWN or name == "setup":
            raise DocsMarkupError(f"{where}: unknown docs-test directive {name!r}")
        if name in ("skip", "file", "pytest", "warns") and not arg:
            raise DocsMarkupError(f"{where}: '{name}' needs an argument")
        if name in ("continue", "notebook") and arg:
            raise DocsMarkupError(f"{where}: '{name}' takes no argument")
        found[name] = arg
    return found, ""


def _rel(path: Path) -> str:
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def parse_page(path: Path) -> list[Block]:
    """The fenced blocks of a page that carry code to run or write, with their directives."""
    text = Path(path).read_text(encoding="utf-8")
    lines = text.splitlines()
    rel = _rel(path)
    blocks: list[Block] = []
    pending: dict = {}
    setup, setup_line = "", 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("<!--") and "docs-test:" in line:
            start = i
            chunk = line
            while "-->" not in chunk and i + 1 < len(lines):
                i += 1
                chunk += "\n" + lines[i]
            m = DIRECTIVE.search(chunk)
            if not m:
                raise DocsMarkupError(f"{rel}:{start + 1}: unterminated docs-test comment")
            found, code = _directives(m.group(1), f"{rel}:{start + 1}")
            if code:
                setup, setup_line = code, start + 2
            pending.update(found)
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            indent, fence, lang = m.groups()
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith(fence):
                j += 1
            code = "\n".join(l[len(indent):] if l.startswith(indent) else l
                             for l in lines[i + 1:j]) + "\n"
            block = Block(i + 2, lang, code, pending, setup, setup_line)
            if pending or setup:
                if not block.runs:
                    raise DocsMarkupError(
                        f"{rel}:{i + 1}: a docs-test comment before a block that is "
                        f"neither python nor marked 'file'/'pytest'")
            if block.runs:
                blocks.append(block)
            pending, setup, setup_line = {}, "", 0
            i = j + 1
            continue
        if line.strip() and pending:
            raise DocsMarkupError(f"{rel}:{i + 1}: a docs-test comment must come right "
                                  f"before a fenced block")
        i += 1
    if pending or setup:
        raise DocsMarkupError(f"{rel}: a docs-test comment at the end of the page")
    return blocks


def groups(path: Path) -> list[Group]:
    """A page's blocks grouped by ``continue``: each group runs in one namespace."""
    rel = _rel(path)
    out: list[Group] = []
    for block in parse_page(path):
        skip = block.directives.get("skip")
        if "continue" in block.directives:
            if not out:
                raise DocsMarkupError(f"{rel}:{block.line}: 'continue' on the first block")
            if skip is not None and out[-1].skip is None:
                # Skipping a continuation skips it and what continues it; the blocks
                # before it still run.
                out.append(Group(rel, [block], skip))
            else:
                out[-1].blocks.append(block)
        else:
            out.append(Group(rel, [block], skip))
    return out


# --------------------------------------------------------------------------------------
# The runner: one subprocess per page.

def _compile(code: str, filename: str, line: int, notebook: bool):
    # Leading newlines make tracebacks give the Markdown file's own line numbers.
    source = "\n" * (line - 1) + code
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if notebook else 0
    return compile(source, filename, "exec", flags=flags, dont_inherit=True)


def _run_block(block: dict, namespace: dict, filename: str) -> None:
    import asyncio
    import subprocess

    if block["setup"]:
        exec(_compile(block["setup"], filename + " (setup)", block["setup_line"], False),
             namespace)
    d = block["directives"]
    if "file" in d or "pytest" in d:
        name = d.get("file") or d["pytest"]
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(block["code"], encoding="utf-8")
        if "pytest" in d:
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name],
                capture_output=True, text=True, timeout=120)
            print(proc.stdout, end="")
            print(proc.stderr, end="", file=sys.stderr)
            if proc.returncode != 0:
                raise AssertionError(f"pytest {name} exited with {proc.returncode}:\n"
                                     f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
            shown = pytest_warnings(proc.stdout + proc.stderr)
            if shown and "warns" not in d:
                raise AssertionError(f"pytest {name} passed with warnings:\n"
                                     + "\n".join(shown))
        return
    code = _compile(block["code"], filename, block["line"], "notebook" in d)
    if "notebook" in d:
        result = eval(code, namespace)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
    else:
        exec(code, namespace)


def run_groups(spec: dict) -> list[dict]:
    import builtins
    import faulthandler

    import aioflow as flow

    results = []
    base = Path(spec["tmp"])
    for k, group in enumerate(spec["groups"]):
        folder = base / f"group{k}_line{group['line']}"
        folder.mkdir(parents=True)
        os.chdir(folder)
        where = f"{group['page']}:{group['line']}"
        print(f"\n===== {where}", flush=True)
        print(f"\n===== {where}", file=sys.stderr, flush=True)
        faulthandler.dump_traceback_later(spec["group_timeout"], exit=True)
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        shown: list[str] = []
        expected = {w for b in group["blocks"] for w in
                    [b["directives"].get("warns")] if w}
        error = None
        start = time.perf_counter()
        original_showwarning = warnings.showwarning

        def showwarning(message, category, filename, lineno, file=None, line=None):
            if category.__name__ not in expected:
                shown.append(f"{filename}:{lineno}: {category.__name__}: {message}")
            original_showwarning(message, category, filename, lineno, file, line)

        with warnings.catch_warnings():
            warnings.simplefilter("default")     # show every warning, once per place
            warnings.showwarning = showwarning
            try:
                for block in group["blocks"]:
                    _run_block(block, namespace, str(ROOT / group["page"]))
                # What a block left pending (steps, callbacks, errors it never raised)
                # belongs to that block: a pending error is raised here.
                flow.clear_default_session()
            except BaseException:             # noqa: BLE001 - reported, then go on
                error = traceback.format_exc()
                try:
                    flow.clear_default_session()
                except BaseException:         # noqa: BLE001
                    pass
        faulthandler.cancel_dump_traceback_later()
        sys.stdout.flush()
        sys.stderr.flush()
        if error is None and shown:
            error = "unexpected warnings (mark the block 'warns CATEGORY' if intended):\n" \
                    + "\n".join(shown)
        results.append({"where": where, "ok": error is None, "error": error,
                        "seconds": round(time.perf_counter() - start, 3)})
        Path(spec["result"]).write_text(json.dumps(results), encoding="utf-8")
    os.chdir(base)
    return results


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    spec["result"] = argv[2]
    results = run_groups(spec)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
