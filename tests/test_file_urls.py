"""Which local file a ``file://`` URL of a lock names: envguard hashes that file and hands the installer the
same one, so its reading must be the standard library's (urlsplit, unquote) for every URL, including the
shortcut taken for the plain ``file:///path`` form every create meets once per package."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envguard.create.integrity import file_url_path, is_file_url


def _stdlib(url: str) -> Path | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


_PIECES = st.sampled_from(["file:", "FILE:", "file://", "file:///", "/", "//", "host", "%20", "%2F", "%", "?",
                           "#", "a", "é", " ", "\t", "\n", "\r", ":", "[", "]", "@", "..", ".conda", "~"])


@pytest.mark.slow  # 3,000 examples: seconds of CPU
@settings(max_examples=3000, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=10).map("".join) | st.text(max_size=40).map(lambda t: "file:///" + t))
def test_file_url_path_reads_every_url_as_urlsplit_and_unquote_do(url: str) -> None:
    assert file_url_path(url) == _stdlib(url), url
    try:
        scheme = urlsplit(url).scheme
    except ValueError:  # a malformed host ("file://["): no path, whatever is_file_url says
        return
    assert is_file_url(url) == (scheme == "file"), url


@pytest.mark.skipif(os.name == "nt", reason="POSIX paths")
def test_the_plain_form_and_its_neighbours() -> None:
    assert file_url_path("file:///srv/ch/linux-64/a-1-0.conda") == Path("/srv/ch/linux-64/a-1-0.conda")
    assert file_url_path("file:///srv/my%20channel/a-1-0.conda") == Path("/srv/my channel/a-1-0.conda")
    assert file_url_path("file:///srv/ch/a-1-0.conda#sha256=00") == Path("/srv/ch/a-1-0.conda")
    assert file_url_path("file:///srv/c\th/a-1-0.conda") == Path("/srv/ch/a-1-0.conda")  # urlsplit drops tabs
    assert file_url_path("file://host/srv/a-1-0.conda") == Path("/srv/a-1-0.conda")
    assert file_url_path("https://example.org/a-1-0.conda") is None
