"""`text.clip`: what every reader of a long output (the model, a log, a report) is shown of it."""

from __future__ import annotations

import pytest

from cuda_agent.text import clip

TEXT = "".join(chr(ord("a") + i % 26) for i in range(100))


def test_a_text_within_the_limit_is_itself():
    assert clip(TEXT, 100) is TEXT and clip("", 0) == ""


@pytest.mark.parametrize("keep, kept", [("head", TEXT[:10]), ("tail", TEXT[-10:]), ("ends", TEXT[:5] + TEXT[-5:])])
def test_a_long_text_keeps_limit_characters_where_asked_and_says_how_many_went(keep, kept):
    out = clip(TEXT, 10, keep)
    assert "[... 90 characters dropped ...]" in out
    assert out.replace("[... 90 characters dropped ...]", "").replace("\n", "").replace(" ", "") == kept


def test_an_odd_limit_keeps_exactly_that_many_and_zero_keeps_none():
    assert clip(TEXT, 7).replace("[... 93 characters dropped ...]", "").replace("\n", "") == TEXT[:3] + TEXT[-4:]
    assert clip(TEXT, 0, "tail") == "[... 100 characters dropped ...]\n"


def test_an_unknown_keep_is_refused():
    with pytest.raises(ValueError, match="keep='middle'"):
        clip(TEXT, 10, "middle")
