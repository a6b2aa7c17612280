"""envguard.sources.lockscan: the fast conda-lock reader must give exactly what PyYAML gives, or step aside.

Its contract: ``load_lock(path, text) == yamlio.load_fast(path, text)`` and ``load_subset`` likewise, for
every input (errors included). The fast path must also actually be taken for conda-lock's own layout.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envguard.errors import UserError
from envguard.sources import lockscan
from envguard.sources.lockscan import load_lock, load_small, load_subset
from envguard.yamlio import load_fast


def fast_layout(text: str) -> object:
    """The fast reader alone: its result, or None where it hands over to PyYAML."""
    try:
        return lockscan._load_fast_layout(text)
    except lockscan._Unsure:
        return None


def fast_block(text: str) -> object:
    try:
        return lockscan._Block(text.split("\n")).document()
    except lockscan._Unsure:
        return None


def fast_small(text: str) -> object:
    """load_small's block parser alone (comments after values dropped), None where it hands over to PyYAML."""
    try:
        return lockscan._Block([lockscan._uncommented(line) for line in text.split("\n")]).document()
    except lockscan._Unsure:
        return None


def same_as_pyyaml(text: str, path: str = "conda-lock.yml") -> None:
    """load_lock and load_subset agree with load_fast: same data, or the same error."""
    try:
        expected: object = load_fast(path, text)
    except UserError as e:
        expected = ("error", e.message)
    for reader in (load_lock, load_subset):
        try:
            got: object = reader(path, text)
        except UserError as e:
            got = ("error", e.message)
        assert got == expected, (reader.__name__, text)
        if not isinstance(expected, tuple):
            assert [type(x) for x in _leaves(got)] == [type(x) for x in _leaves(expected)], text


def _leaves(data: object) -> list[object]:
    if isinstance(data, dict):
        return [x for k, v in data.items() for x in [k, *_leaves(v)]]
    if isinstance(data, list):
        return [x for v in data for x in _leaves(v)]
    return [data]


# --------------------------------------------------------------------------- real locks


@pytest.mark.slow
def test_real_world_locks_read_fast_and_identically(realworld: Path) -> None:
    locks = sorted((realworld / "conda-lock").glob("*.yml"))
    assert locks
    for path in locks:
        text = path.read_text(encoding="utf-8")
        slow = load_fast(path, text)
        fast = fast_layout(text)
        assert fast is not None, f"{path.name}: conda-lock's own layout should take the fast path"
        assert fast == slow, path.name
        assert load_lock(path, text) == slow
        # the metadata block alone, as lockfile.read_metadata parses it
        start = text.index("\nmetadata:") + 1
        end = text.index("\npackage:") + 1 if "\npackage:" in text[start:] else len(text)
        block = text[start:end] if start < end else text[start:]
        assert fast_block(block) is not None, path.name
        assert load_subset(path, block) == load_fast(path, block), path.name


@pytest.mark.slow
def test_other_yaml_files_are_never_misread(realworld: Path) -> None:
    """environment.yml, pixi.lock, exports: whatever the fast readers accept, they read as PyYAML does."""
    files = [p for p in sorted(realworld.rglob("*")) if p.is_file() and p.suffix in (".yml", ".yaml", ".lock")]
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            slow: object = load_fast(path, text)
        except UserError:
            slow = "error"
        for fast in (fast_layout(text), fast_block(text), fast_small(text)):
            if fast is not None:
                assert fast == slow, path.name


@pytest.mark.slow
def test_read_lock_does_not_import_pyyaml(tmp_path: Path, realworld: Path) -> None:
    lock = sorted((realworld / "conda-lock").glob("*.yml"))[0]
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "from pathlib import Path\n"
        "from envguard.filekind import kind_of\n"
        "from envguard.lock import read_lock, read_metadata\n"
        "from envguard.sources import load\n"
        f"lock = read_lock({str(lock)!r})\n"
        f"meta = read_metadata({str(lock)!r})\n"
        "assert lock.packages and meta['platforms']\n"
        # the one reader's fast path serves every command: create --lockfile, check and fleet (kind_of), diff (load)
        f"assert kind_of(Path({str(lock)!r})) == 'conda-lock' and load({str(lock)!r}).packages\n"
        "print('yaml' in sys.modules)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


# --------------------------------------------------------------------------- crafted cases

HEAD = "version: 1\nmetadata:\n  platforms:\n  - linux-64\n  sources:\n  - environment.yml\n"
ENTRY = ("- name: pkg\n  version: 1.0.0\n  manager: conda\n  platform: linux-64\n  dependencies:\n"
         "    python: '>=3.8'\n  url: https://x.org/c/linux-64/pkg-1.0.0-h0_0.conda\n  hash:\n"
         "    md5: 0123abc\n    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
         "  category: main\n  optional: false\n")


def lock_text(entry: str = ENTRY, head: str = HEAD, tail: str = "") -> str:
    return head + "package:\n" + entry + tail


@pytest.mark.parametrize("text", [
    lock_text(),
    lock_text(tail="version: 1\n"),  # a top-level key after the list
    lock_text(head="# a comment\n\n" + HEAD),
    lock_text(ENTRY + ENTRY.replace("pkg", "other")),
    lock_text(ENTRY.replace("  optional: false\n", "  optional: yes\n")),
    lock_text(ENTRY.replace("  optional: false\n", "  optional: On\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: ~\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category:\n")),  # null
    lock_text(ENTRY.replace("  category: main\n", "  category: 'it''s'\n")),
    lock_text(ENTRY.replace("  category: main\n", '  category: "dq"\n')),
    lock_text(ENTRY.replace("  category: main\n", '  category: "a\\tb"\n')),  # an escape
    lock_text(ENTRY.replace("  category: main\n", "  category: main   \n")),  # trailing spaces
    lock_text(ENTRY.replace("  category: main\n", "  category: main # a comment\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: a: b\n")),  # not YAML
    lock_text(ENTRY.replace("  category: main\n", "  category: 'open\n")),  # not YAML
    lock_text(ENTRY.replace("  category: main\n", "  category: [main, dev]\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: &a main\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: !!str 1\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: |\n    main\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: main\n    continued\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: main\n\tx: y\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: 1\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: 1.5\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: 2024-01-02\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: 0x1f\n")),
    lock_text(ENTRY.replace("  category: main\n", "  category: café\n")),
    lock_text(ENTRY.replace("version: 1.0.0", "version: 1.10")),  # a float to YAML
    lock_text(ENTRY.replace("version: 1.0.0", "version: '1.10'")),
    lock_text(ENTRY.replace("version: 1.0.0", "version: 1.0a1")),
    lock_text(ENTRY.replace("md5: 0123abc", "md5: 01234567")),  # octal
    lock_text(ENTRY.replace("md5: 0123abc", "md5: 1234")),  # all digits: an int
    lock_text(ENTRY.replace("    python: '>=3.8'\n", "    null: '>=3.8'\n")),  # a null key
    lock_text(ENTRY.replace("    python: '>=3.8'\n", "    python: '>=3.8'\n      deeper: x\n")),
    lock_text(ENTRY.replace("    python: '>=3.8'\n", "    - python\n")),
    lock_text(ENTRY.replace("  dependencies:\n    python: '>=3.8'\n", "  dependencies: {}\n")),
    lock_text(ENTRY.replace("  dependencies:\n    python: '>=3.8'\n", "  dependencies: {python: x}\n")),
    lock_text(ENTRY.replace("  dependencies:\n    python: '>=3.8'\n", "  dependencies:\n  - a\n")),
    lock_text(ENTRY.replace("- name: pkg\n", "-   name: pkg\n")),
    lock_text(ENTRY.replace("  ", "    ")),  # other indentation
    lock_text(ENTRY.replace("\n", "\r\n")),
    lock_text(ENTRY + "# between\n" + ENTRY),
    lock_text(ENTRY + "\n\n" + ENTRY),
    lock_text(ENTRY, tail="package:\n" + ENTRY),  # the key twice
    lock_text(ENTRY, tail="---\nx: 1\n"),
    lock_text(""),  # an empty list
    HEAD + "package: []\n",
    "package:\n" + ENTRY,  # no metadata
    "metadata: 'multi\npackage:\n" + ENTRY + "'\n",  # "package:" inside a scalar
    "- a\n- b\n",
    "",
])
def test_crafted_files_read_as_pyyaml_reads_them(text: str) -> None:
    same_as_pyyaml(text)


SCALARS = [
    "0", "1", "12", "-1", "+1", "-0", "00", "012", "08", "0o7", "0x1F", "0b101", "0b", "0x", "1_000", "1__0", "0_",
    "1:30", "190:20:30", "1:30.5", "1:2:3", "1.0", "1.", ".5", "1e5", "1.0e+5", "1.0e5", "1e+5", "1.2.3e4",
    "-.inf", ".inf", "+.INF", ".nan", ".NaN", ".Inf", "inf", "nan", "2023-01-02", "2023-1-2 10:00:00",
    "2023-01-02T10:00:00Z", "2023-01-02t10:00:00.5+01:00", "2023-01-02 10:00:00 -5", "<<", "=", "~", "null",
    "Null", "NULL", "nul", "yes", "Yes", "YES", "yEs", "no", "n", "y", "on", "off", "On", "OFF", "true", "True",
    "TRUE", "tRue", "false", "3.8.0", "1.10", "2024.1", "1.0a1", "1.0.post1", "6598257959d6b2ab", "1234567890",
    "0123", "+x", ".hidden", "=x", "<x", "~x", "linux-64", "py_0", "_x", "h0_0", "1-2", "Z",
]


def test_plain_scalars_resolve_as_pyyaml_resolves_them() -> None:
    rng = random.Random(7)
    extra = ["".join(rng.choice("0123456789abcdefxeE.:-+_ Tt") for _ in range(rng.randint(1, 9))).strip()
             for _ in range(3000)]
    for value in SCALARS + [v for v in extra if v]:
        try:
            mine = lockscan._scalar(value)
        except lockscan._Unsure:
            continue
        theirs = yaml.load(f"k: {value}", Loader=yaml.SafeLoader)["k"]
        assert (type(mine), mine) == (type(theirs), theirs), value


def test_generated_documents_read_as_pyyaml_reads_them() -> None:
    """Seeded random block documents: whatever the fast readers accept must equal PyYAML's reading."""
    rng = random.Random(11)
    keys = ["name", "url", "hash", "deps", "null", "1", "a.b", "x-y", "'q'", "k k"]
    values = ["x", "x", "plain", "v-2", "y z", "3.8.0", "'a''b'", '"dq"', "{}", "[]", "{a: b}", "", "", "1", "1.0", "yes", "~",
              "a # c", "a: b", "*x", "|", "x:", "  spaced  "]

    def mapping(lines: list[str], indent: int, depth: int) -> None:
        for _ in range(rng.randint(1, 3)):
            key, value = rng.choice(keys), rng.choice(values)
            if value == "" and depth < 3:
                lines.append(" " * indent + f"{key}:")
                if rng.random() < 0.5:
                    mapping(lines, indent + rng.choice([2, 2, 4, 1]), depth + 1)
                else:
                    for _ in range(rng.randint(1, 3)):
                        lines.append(" " * (indent + rng.choice([0, 2])) + "- "
                                     + rng.choice([rng.choice(values) or "v", f"{rng.choice(keys)}: v"]))
            else:
                lines.append(" " * indent + f"{key}: {value}".rstrip() + rng.choice(["", " "]))
            if rng.random() < 0.1:
                lines.append(rng.choice(["", "# c", "   # c"]))

    accepted = 0
    for _ in range(10000):
        lines: list[str] = []
        mapping(lines, 0, 0)
        if rng.random() < 0.6:
            lines.append("package:")
            for _ in range(rng.randint(1, 3)):
                lines.append(f"- name: {rng.choice(values) or 'p'}")
                for _ in range(rng.randint(0, 4)):
                    value = rng.choice(values)
                    lines.append(f"  {rng.choice(keys)}: {value}".rstrip())
                    if value == "":
                        lines.extend(f"    {rng.choice(keys)}: {rng.choice(values) or 'z'}"
                                     for _ in range(rng.randint(0, 2)))
        text = "\n".join(lines) + "\n"
        try:
            slow: object = yaml.load(text, Loader=yaml.CSafeLoader)
        except yaml.YAMLError:
            slow = "error"
        for fast in (fast_layout(text), fast_block(text), fast_small(text)):
            if fast is not None:
                accepted += 1
                assert fast == slow, text
    assert accepted > 600  # the generator exercises the fast path, not only the hand-over


# --------------------------------------------------------------------------- small environment files (#37)

ENV = ("# written by envguard init\nname: t\nchannels:\n  - conda-forge\n  - nodefaults  # never mix: it's\n"
       "dependencies:\n  - python=3.11\n  # a whole-line comment\n  - pytorch=2.13.*=cpu*   # the build\n"
       "platforms:\n  - linux-64\n")


@pytest.mark.parametrize("text", [
    ENV,
    ENV.replace("  - python=3.11\n", "  - python=3.11 #\n"),
    ENV.replace("  - python=3.11\n", "  - python=3.11#not-a-comment\n"),
    ENV.replace("  - python=3.11\n", "  - https://x.org/a #frag\n"),
    ENV.replace("  - python=3.11\n", "  - 'python # quoted' # after\n"),
    ENV.replace("  - python=3.11\n", '  - "python # quoted"\n'),
    ENV.replace("  - python=3.11\n", "  - python 'x' # a\n"),
    ENV.replace("dependencies:\n", "dependencies: # the list\n"),
    ENV.replace("name: t\n", "name: # none\n"),
    ENV.replace("name: t\n", "name: 'a\n  b # c'\n"),  # a quoted scalar over two lines
    ENV.replace("name: t\n", 'name: "a\n  b # c"\n'),
    ENV.replace("name: t\n", "name: a\n  b # c\n"),  # a plain scalar over two lines
    ENV.replace("name: t\n", "name: |\n  a # c\n"),  # a block scalar keeps its "#"
    ENV.replace("name: t\n", "name: >\n  a # c\n"),
    ENV.replace("name: t\n", "name: [a, # c\n  b]\n"),
    ENV.replace("name: t\n", "name: a # c: d\n"),
    ENV.replace("name: t\n", "name # c: d\n"),
    ENV.replace("name: t\n", "name: 1 # c\n"),
    ENV.replace("name: t\n", "name: yes # c\n"),
    ENV.replace("name: t\n", "name: - # c\n"),
    ENV.replace("  - python=3.11\n", "  - # c\n"),
    ENV.replace("  - python=3.11\n", "  -  # c\n  - x\n"),
    ENV.replace("  - python=3.11\n", "  - a: b # c\n    d: e # f\n"),
    ENV.replace("  - python=3.11\n", "  - pip:\n    - torch # c\n"),
    ENV + "variables:\n  A: '1' # c\n  B: x # c\n",
    ENV.replace("  - nodefaults", "  - &n nodefaults"),
    ENV.replace("  - nodefaults", "\t- nodefaults"),
])
def test_small_environment_files_read_as_pyyaml_reads_them(text: str) -> None:
    """load_small (variant overlays, environment.yml) agrees with load_fast: same data, or the same error."""
    try:
        expected: object = load_fast("environment.yml", text)
    except UserError as e:
        expected = ("error", e.message)
    try:
        got: object = load_small("environment.yml", text)
    except UserError as e:
        got = ("error", e.message)
    assert got == expected, text


def test_init_written_environment_files_read_without_pyyaml(tmp_path: Path) -> None:
    """The files `envguard init` writes (comments after values included) take the block parser, not PyYAML:
    a variant create reads them on every run (bench/variant_pick.py)."""
    example = Path(__file__).resolve().parent.parent / "examples" / "pytorch-variants"
    files = [example / "environment.yml", *sorted((example / "variants").glob("*.yml"))]
    assert len(files) >= 3
    script = tmp_path / "probe.py"
    script.write_text("import sys\nfrom envguard.sources.lockscan import load_small\nfrom envguard.yamlio import "
                      "read_text\nfor f in sys.argv[1:]:\n    assert load_small(f, read_text(f))['dependencies']\n"
                      "print('yaml' in sys.modules)\n")
    proc = subprocess.run([sys.executable, str(script), *map(str, files)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    for f in files:
        assert load_small(str(f), f.read_text()) == load_fast(str(f))
