"""README.md is an entry point, and the documentation behind it holds together.

README is what a newcomer reads first and what `.ci/run` executes (its second ```bash block), so its size and
the order of its code blocks are part of the contract; each command's reference lives in docs/commands/, and a
link that leads nowhere is a broken promise to the reader.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
COMMANDS = DOCS / "commands"

FAST_LANE = '.venv/bin/python -m pytest -q -m "not slow"'
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def _fences(text: str) -> list[tuple[str, str]]:
    """(info string, body) of every fenced code block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE.finditer(text)]


def _bash_blocks(text: str) -> list[str]:
    return [body for info, body in _fences(text) if info == "bash"]


def _prose(text: str) -> str:
    """The text outside code: links inside a code block or a `code span` are not links."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading anchors on its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for m in HEADING.finditer(FENCE.sub("", path.read_text(encoding="utf-8"))):
        base = _slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _cli_commands() -> set[str]:
    from envguard.cli import app

    return {c.name or c.callback.__name__ for c in app.registered_commands if c.callback is not None}


# --------------------------------------------------------------------------- README as an entry point


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 200, f"README.md has {len(lines)} lines: an entry point, not a manual (move detail to docs/)"


def test_readme_first_bash_blocks_are_setup_then_tests() -> None:
    """The first ```bash block sets up a fresh machine and runs envguard's main job; the second is the test
    command. Both are single commands a newcomer pastes as they are."""
    blocks = _bash_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 2, "README.md needs the set-up and the test command as its first two ```bash blocks"
    setup, tests = (b.strip() for b in blocks[:2])
    assert "\n" not in setup and "\n" not in tests, (setup, tests)
    assert setup.startswith("python3 -m venv .venv") and " -e . " in f"{setup} ", setup
    assert setup.endswith(".venv/bin/envguard check -p .venv"), setup
    assert "-e '.[test]'" in tests and ".venv/bin/python -m pytest" in tests, tests


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` runs what README calls the test command: its own extraction, run on README, finds exactly it."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    m = re.search(r"test_cmd=\$\(awk '([^']*)' README\.md\)", script)
    assert m, ".ci/run no longer reads its test command from README.md with awk"
    awk = shutil.which("awk")
    assert awk, "awk is needed by .ci/run itself"
    found = subprocess.run([awk, m.group(1), str(README)], capture_output=True, text=True, check=True).stdout
    assert found.strip() == _bash_blocks(README.read_text(encoding="utf-8"))[1].strip()


def test_readme_names_the_fast_lane_outside_bash_blocks() -> None:
    """The fast lane is written in README, but not as a ```bash block: `.ci/run` counts those."""
    text = README.read_text(encoding="utf-8")
    assert FAST_LANE in text
    assert not any(FAST_LANE in body for body in _bash_blocks(text))
    assert any(FAST_LANE in body for info, body in _fences(text) if info in ("text", "console"))


def test_readme_has_its_sections() -> None:
    headings = {m.group(2) for m in HEADING.finditer(README.read_text(encoding="utf-8")) if m.group(1) == "##"}
    for section in ("Install", "The workflow", "Commands", "Exit codes", "Documentation"):
        assert section in headings, f"README.md has no '## {section}' section"


# --------------------------------------------------------------------------- the command references


def test_every_command_has_a_reference_page() -> None:
    commands = _cli_commands()
    assert {"init", "lint", "lock", "create", "check", "smoke", "diff", "export", "tune", "fleet"} <= commands
    readme = README.read_text(encoding="utf-8")
    for name in sorted(commands):
        page = COMMANDS / f"{name}.md"
        assert page.is_file(), f"`envguard {name}` has no reference page {page.relative_to(REPO)}"
        first = page.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith(f"# envguard {name}"), f"{page.relative_to(REPO)} starts with {first!r}"
        assert f"(docs/commands/{name}.md)" in readme, f"README.md does not link docs/commands/{name}.md"


def test_every_reference_page_is_a_command_or_the_hooks() -> None:
    pages = {p.stem for p in COMMANDS.glob("*.md")}
    stray = pages - _cli_commands() - {"pre-commit"}
    assert not stray, f"docs/commands/ has pages for no command: {sorted(stray)}"


def test_the_precommit_page_documents_every_hook() -> None:
    hooks = [h["id"] for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))]
    page = (COMMANDS / "pre-commit.md").read_text(encoding="utf-8")
    assert hooks and all(f"`{h}`" in page for h in hooks), hooks
    assert "(docs/commands/pre-commit.md)" in README.read_text(encoding="utf-8")


# --------------------------------------------------------------------------- links


def _relative_links_of(text: str) -> list[str]:
    """Link targets that name a file here: http:, https: and mailto: links do not."""
    return [t for t in LINK.findall(_prose(text)) if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]


def _relative_links(path: Path) -> list[str]:
    return _relative_links_of(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("doc", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in _relative_links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.is_file() and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


def test_the_link_check_sees_links() -> None:
    """The link test above must be able to fail: it finds README's links, in tables too, and tells a broken
    anchor from a good one."""
    links = _relative_links(README)
    assert "docs/commands/check.md" in links and "docs/architecture.md" in links
    assert "which-environment" in _anchors(DOCS / "environments.md")
    assert "this-repositorys-environmentyml-and-conda-lockyml" in _anchors(COMMANDS / "lock.md")
    assert "no-such-heading" not in _anchors(COMMANDS / "lock.md")
    assert _relative_links_of("see [x](a.md#b) and `[y](code.md)`, [z](https://e.invalid)") == ["a.md#b"]
