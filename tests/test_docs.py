"""The documentation cannot drift: every shell block of README.md and docs/*.md runs as written.

Each page's ```bash blocks run in order, one command (a line, with its ``\\`` continuations) at a time, through
``bash`` in a fresh copy of the repository (its tracked and new files, committed to a git repository of its own)
placed beside a ``shared`` link to the real datasets, as a checkout sits beside ``../shared``. The info string
after ``bash`` tags a block:

- (nothing): run as written by the default tests;
- ``slow``: run as written, only in the slow set (``make test-all``);
- ``long``: a full experiment; run with ``--quick`` appended, only in the slow set;
- ``no-test``: never run (it needs a cluster, a GPU, raw files that are not here, or installs packages; the page
  says so).

After a page's commands, ``git status`` of the copy must be clean: every command writes only where .gitignore
covers (``out/``, ``data/``). The copies share one dataset cache for the session (``data`` links to it), so a
graph two pages generate is generated once. ``GNNSUITE_DOC_TIMES=FILE`` appends every command's time to FILE
(JSON lines), for the record of what the documentation costs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.paths import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
TAGS = {"", "slow", "long", "no-test"}
FENCE = re.compile(r"^```(?P<lang>[A-Za-z]*)(?P<tags>[^\n]*)\n(?P<body>.*?)^```", re.M | re.S)
PENDING_PAGES = {"docs/api.md", "docs/datasets.md"}
"""Pages linked from the README that other changes add (the Python API, dataset import)."""
README_MAX_LINES = 120
COMMAND_TIMEOUT_S = 1800  # `gnnsuite reproduce --quick` (slow set) took more than 15 minutes on busy cores


@dataclass(frozen=True)
class Command:
    """One documented command: its text, its block's tag, and where it is (``page:line``)."""

    text: str
    tag: str
    where: str

    def to_run(self) -> str:
        """The command as run: ``long`` ones with ``--quick`` (their comment dropped)."""
        if self.tag != "long":
            return self.text
        return shlex.join(shlex.split(self.text, comments=True) + ["--quick"])


def page_commands(page: Path) -> list[Command]:
    """The commands of every ```bash block of ``page``, in order."""
    return block_commands(page.read_text(), str(page.relative_to(REPO_ROOT)))


def block_commands(text: str, name: str) -> list[Command]:
    """The commands of every ```bash block of the Markdown ``text`` (of the page ``name``), in order."""
    commands = []
    for block in FENCE.finditer(text):
        if block.group("lang") != "bash":
            continue
        tag = block.group("tags").strip()
        first_line = text[: block.start("body")].count("\n") + 1
        lines = block.group("body").split("\n")
        i = 0
        while i < len(lines):
            start, line = i, lines[i]
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            if line.strip() and not line.strip().startswith("#"):
                commands.append(Command(line.strip(), tag, f"{name}:{first_line + start}"))
    return commands


def test_readme_is_short_and_every_block_has_a_known_tag():
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    for page in PAGES:
        for block in FENCE.finditer(page.read_text()):
            if block.group("lang") == "bash":
                assert block.group("tags").strip() in TAGS, f"{page}: unknown block tag {block.group('tags')!r}"
    assert sum(len(page_commands(page)) for page in PAGES) >= 40  # the parser finds the commands


def test_every_relative_link_points_at_a_file():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for page in PAGES:
        assert "](#" not in page.read_text(), f"{page.name}: an in-page anchor (sections moved between pages)"
        for target in link.findall(page.read_text()):
            if "://" in target:
                continue
            path = (page.parent / target).resolve()
            name = str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)
            assert path.exists() or name in PENDING_PAGES, f"{page.relative_to(REPO_ROOT)}: broken link {target}"


def test_long_commands_get_their_quick_flag():
    command = Command("python -m experiments.figures.pipeline_speed   # 90 minutes", "long", "x:1")
    assert command.to_run() == "python -m experiments.figures.pipeline_speed --quick"
    assert Command("gnnsuite run a.yaml  # one run", "", "x:1").to_run() == "gnnsuite run a.yaml  # one run"
    text = "```bash\na \\\n   --b\n# c\n```\n```bash no-test\nd\n```\n```text\ne\n```\n"
    assert [(c.text, c.tag, c.where) for c in block_commands(text, "p")] == [("a --b", "", "p:2"),
                                                                              ("d", "no-test", "p:7")]


# ---------------------------------------------------------------------------------------------- running them
def _repository_copy(into: Path) -> Path:
    """The repository's tracked and new (not ignored) files, copied and committed into ``into/repo``."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    repo = into / "repo"
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file() and not source.is_symlink():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    git = ["git", "-c", "user.name=docs", "-c", "user.email=docs@localhost", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "copy"], cwd=repo, check=True)
    return repo


@pytest.fixture(scope="session")
def dataset_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("doc-data")


def _run_page(page: Path, tags: set[str], tmp_path: Path, dataset_cache: Path) -> None:
    commands = [c for c in page_commands(page) if c.tag in tags]
    if not commands:
        pytest.skip(f"{page.name}: no commands tagged {sorted(tags)}")
    repo = _repository_copy(tmp_path)
    shared = Path(os.environ.get("GNNSUITE_SHARED", REPO_ROOT.parent / "shared"))
    (tmp_path / "shared").symlink_to(shared.resolve())
    (repo / "data").symlink_to(dataset_cache)
    env = {**os.environ, "PYTHONPATH": str(repo), "GNNSUITE_SHARED": str(shared.resolve()),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("GNNSUITE_KERNEL_BOUNDSCHECK", None)  # as a user runs them (the tests' debug kernels compile slower)
    times = os.environ.get("GNNSUITE_DOC_TIMES")
    for command in commands:
        started = time.perf_counter()
        done = subprocess.run(["bash", "-c", command.to_run()], cwd=repo, env=env, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        elapsed = time.perf_counter() - started
        if times:
            with open(times, "a") as log:
                log.write(json.dumps({"where": command.where, "tag": command.tag, "command": command.to_run(),
                                      "seconds": round(elapsed, 1), "status": done.returncode}) + "\n")
        assert done.returncode == 0, (f"{command.where}: `{command.to_run()}` exited {done.returncode}:\n"
                                      f"{(done.stdout + done.stderr)[-3000:]}")
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout
    assert status == "", f"{page.name}: the documented commands left files git sees:\n{status}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_documented_commands_run_as_written(page, tmp_path, dataset_cache):
    _run_page(page, {""}, tmp_path, dataset_cache)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_documented_command_runs_slow_and_long_ones_quick(page, tmp_path, dataset_cache):
    _run_page(page, {"", "slow", "long"}, tmp_path, dataset_cache)
