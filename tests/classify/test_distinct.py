"""Each distinct command and stage text is classified once: how texts are numbered."""

from __future__ import annotations

import polars as pl
import pytest

from trajlens.classify._vectorised import distinct_codes


@pytest.mark.parametrize("key", [None, "length"])
def test_distinct_codes_number_each_distinct_text_once_even_when_keys_collide(key):
    values = pl.Series(["cat a.py", "ls", "cat a.py", "cat b.py", "", "ls", "cat b.py", "pytest"])
    # Grouped by length, "cat a.py" and "cat b.py" share a key: the texts must still decide.
    codes, firsts = distinct_codes(values, None if key is None else values.str.len_bytes())
    assert codes.to_list() == [0, 1, 0, 2, 3, 1, 2, 4]
    assert firsts.to_list() == [0, 1, 3, 4, 7]
    assert values.gather(firsts.gather(codes)).to_list() == values.to_list()
