"""The `ud` parser's lexicon files: the shipped ones load and say what they are for; malformed ones fail naming the
file and the lexicon."""

from __future__ import annotations

import json

import pytest

from amrsim.amr import ud
from amrsim.amr.ud import load_lexicons
from tests.helpers import ROOT

LEXICON_DIR = ROOT / "amrsim" / "amr" / "ud_lexicons"


def test_shipped_lexicons_load_and_each_says_what_it_is_for():
    files = sorted(LEXICON_DIR.glob("*.json"))
    assert [f.name for f in files] == ["concepts.json", "roles.json", "words.json"]
    for path in files:
        raw = json.loads(path.read_text(encoding="utf-8"))
        loaded = load_lexicons(path)
        assert loaded.keys() == raw.keys()
        for name, entry in raw.items():
            assert entry["about"].strip(), f"{path.name}: {name} has an empty 'about'"
            if "words" in entry:
                assert loaded[name] == frozenset(entry["words"])
            else:
                assert list(loaded[name]) == list(entry["map"])  # order kept


def test_rules_read_the_lexicon_files():
    assert ud.SENSES["have"] == "have-03"
    assert ud._PHRASAL[("clean", "out")] == "clean-out-03"  # "clean out" in the file: a (verb, particle) pair
    assert ud._MODALS["must"] == ("obligate-01", "ARG2")
    assert ud._PREP_ROLES["in"] is None and ud._PREP_ROLES["about"] == "topic"
    assert "ne" in ud._NEG and isinstance(ud._NEG, frozenset)


def test_corpus_fitted_lexicons_name_their_corpus():
    fitted = {name for path in LEXICON_DIR.glob("*.json")
              for name, entry in json.loads(path.read_text(encoding="utf-8")).items() if "fitted_on" in entry}
    assert {"senses", "phrasal_verbs", "topic_nouns", "person_nouns"} <= fitted
    for path in LEXICON_DIR.glob("*.json"):
        for name, entry in json.loads(path.read_text(encoding="utf-8")).items():
            if name in fitted:
                assert "Little Prince" in entry["fitted_on"], (path.name, name)


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot read the lexicon file"),
    ('["a"]', "expected an object of lexicons"),
    ('{"neg": {"words": ["not"]}}', "lexicon 'neg' needs an 'about' string"),
    ('{"neg": {"about": "x"}}', "lexicon 'neg': give exactly one of 'words'"),
    ('{"neg": {"about": "x", "words": ["not"], "map": {}}}', "lexicon 'neg': give exactly one of 'words'"),
    ('{"neg": {"about": "x", "words": "not"}}', "lexicon 'neg': 'words' must be a list of strings"),
    ('{"neg": {"about": "x", "words": [1]}}', "lexicon 'neg': 'words' must be a list of strings"),
    ('{"m": {"about": "x", "map": ["a"]}}', "lexicon 'm': 'map' must be an object"),
    ('{"m": {"about": "x", "map": {"a": {"b": 1}}}}', "lexicon 'm': the value of 'a' must be"),
    ('{"m": {"about": "x", "map": {"a": true}}}', "lexicon 'm': the value of 'a' must be"),
    ('{"m": {"about": "x", "map": {}, "fited_on": "typo"}}', "lexicon 'm': unknown keys ['fited_on']"),
    ('{"m": {"about": "x", "map": {}, "fitted_on": true}}', "lexicon 'm': 'fitted_on' must be a string"),
])
def test_malformed_lexicon_names_file_and_lexicon(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json") as info:
        load_lexicons(path)
    assert message in str(info.value)


def test_missing_lexicon_file_names_it(tmp_path):
    with pytest.raises(ValueError, match="absent.json: cannot read"):
        load_lexicons(tmp_path / "absent.json")
