"""Credentials in URLs are masked; placeholders and ordinary paths are not."""

from __future__ import annotations

import pytest

from envguard.redact import has_credentials, redact


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:pw@host/chan", "https://***@host/chan"),
        ("https://conda.anaconda.org/t/abc-123/chan/linux-64/x.conda",
         "https://conda.anaconda.org/t/***/chan/linux-64/x.conda"),
        ("https://h/chan?token=s3cret&x=1", "https://h/chan?token=***&x=1"),
        ('{"url": "https://h/t/tok"}', '{"url": "https://h/t/***"}'),
        ("(see https://h/t/tok)", "(see https://h/t/***)"),
        ("https://${USER}:${PASS}@host/chan", "https://${USER}:${PASS}@host/chan"),
        ("https://h/t/${TOKEN}/chan", "https://h/t/${TOKEN}/chan"),
        ("/srv/t/envs/train and C:/t/x", "/srv/t/envs/train and C:/t/x"),
        ("plain text, no url", "plain text, no url"),
    ],
)
def test_redact(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_has_credentials() -> None:
    assert has_credentials("https://u:p@h/c")
    assert has_credentials("https://h/t/tok/c")
    assert not has_credentials("https://${U}:${P}@h/c")
    assert not has_credentials("https://conda.anaconda.org/conda-forge")
