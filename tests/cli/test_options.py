"""The one NAME=VALUE parser behind --param and --option."""

from __future__ import annotations

import pytest

from trajlens.cli._options import parse_options, parse_params
from trajlens.errors import ConfigError


def test_params_are_text_unless_typed():
    assert parse_params(["run_id=123", "n:int=3", "x:float=0.5", "b:bool=false", "l:json=[1, 2]", "t:text=007"]) == {
        "run_id": "123", "n": 3, "x": 0.5, "b": False, "l": [1, 2], "t": "007"}


def test_values_keep_equals_signs_and_may_be_empty():
    assert parse_params(["q=a=b", "empty="]) == {"q": "a=b", "empty": ""}


def test_options_read_json_where_it_parses():
    assert parse_options(["gamma=0.99", "whiten=false", "channels=[0, 1]", "name=gae_raw"]) == {
        "gamma": 0.99, "whiten": False, "channels": [0, 1], "name": "gae_raw"}


def test_every_bad_pair_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        parse_params(["novalue", "n:int=x", "a:when=1", "a=1", "a=2"])
    assert caught.value.problems == [
        "--param 'novalue': expected NAME=VALUE or NAME:TYPE=VALUE, such as run_id=sao-r6 or n:int=3",
        "--param 'n:int=x': not an int (invalid literal for int() with base 10: 'x')",
        "--param 'a:when=1': unknown type 'when'; types: text, str, int, float, bool, json",
        "--param 'a=2': a is given twice",
    ]


def test_option_errors_name_the_option_flag():
    with pytest.raises(ConfigError, match="--option 'gamma': expected NAME=VALUE"):
        parse_options(["gamma"])


def test_advantages_uses_the_shared_parser():
    import trajlens.cli.advantages as advantages

    assert advantages.parse_options is parse_options


def test_an_option_for_a_label_no_estimator_gives_is_named_as_such():
    """``raw.whiten=false`` is NAME=VALUE in form: what is wrong is the label."""
    with pytest.raises(ConfigError) as caught:
        parse_options(["raw.whiten=false", "gamma=0.99"])
    assert caught.value.problems == ["--option 'raw.whiten=false': no --estimator is labelled 'raw'; give the option "
                                     "as NAME=VALUE"]
