"""pipelines.yaml within bounds: alias bombs, languages, one definition per dataset name, the pipeline to run."""

from __future__ import annotations

import logging

import pytest

from amrsim import config as config_module
from amrsim.config import load_config
from amrsim.errors import ConfigError

PIPE = """
default_pipeline: p
pipelines:
  p:
    datasets:
      d: {path: data.tsv, kind: pairs}
"""


@pytest.fixture
def data_file(tmp_path):
    (tmp_path / "data.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n", encoding="utf-8")


def _alias_bomb(levels: int) -> str:
    """'Billion laughs': each level a list of nine aliases of the level below, 9**levels strings in all."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + f"\npipelines: {{p: {{description: *a{levels - 1}}}}}\n"


@pytest.mark.parametrize("levels", [9, 10])
def test_an_alias_bomb_is_refused_before_it_is_built(write_config, levels):
    path = write_config(_alias_bomb(levels))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}:")
    assert f"aliases expand to more than {config_module.MAX_EXPANDED_NODES:,} nodes" in str(e.value)
    assert "\n" not in str(e.value)


def test_the_node_budget_is_what_stops_expansion(write_config, monkeypatch):
    # three levels expand to 9 + 81 + 729 + ... nodes, well under the budget: YAML is read, and validation says what
    # is wrong (a list where a description belongs). The same file under a budget of 500 is stopped while reading.
    path = write_config(_alias_bomb(3))
    with pytest.raises(ConfigError, match=r"key 'description', .*valid string"):
        load_config(path)
    monkeypatch.setattr(config_module, "MAX_EXPANDED_NODES", 500)
    with pytest.raises(ConfigError, match="aliases expand to more than 500 nodes"):
        load_config(path)


def test_a_self_referring_alias_and_deep_nesting_are_one_line_errors(write_config):
    path = write_config("a: &a [1, *a]\npipelines: {}\n")
    with pytest.raises(ConfigError, match=rf"^{path}:1: an alias refers to a node that contains it"):
        load_config(path)
    path = write_config("pipelines: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=rf"^{path}: YAML nested too deeply"):
        load_config(path)


def test_a_config_with_a_few_aliases_still_loads(write_config, data_file):
    body = """
default_pipeline: a
pipelines:
  a:
    datasets: {d: &data {path: data.tsv, kind: pairs, lang: de}}
    encode: &enc {encoders: [minilm], batch_size: 8}
  b:
    datasets: {d: *data}
    encode: {<<: *enc, batch_size: 4}
"""
    cfg = load_config(write_config(body))
    assert cfg.project.pipelines["b"].datasets["d"].lang == "de"
    assert cfg.project.pipelines["b"].encode.batch_size == 4 and cfg.project.pipelines["a"].encode.batch_size == 8


@pytest.mark.parametrize("key, yaml_value, said", [
    ("lang", "klingon", "'klingon' is not a language code"),
    ("lang2", "x-private", "language code 'x-private' (private use) names no language"),
    ("translations", "{klingon: {sentence1: s1}}", "'klingon' is not a language code"),
])
def test_a_language_that_is_no_language_code_is_refused_naming_file_and_key(write_config, data_file, key, yaml_value,
                                                                          said):
    path = write_config(PIPE.replace("kind: pairs}", f"kind: pairs, {key}: {yaml_value}}}"))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: pipeline 'p', key 'datasets.d.{key}")
    assert said in msg and "\n" not in msg


def test_region_tagged_languages_are_read_as_the_language_with_a_note(write_config, data_file, caplog):
    body = PIPE.replace("kind: pairs}", "kind: pairs, lang: de-DE, lang2: en_US, translations: {es-419: {}}}") + \
        "    evaluate: {sts: {datasets: [d], lang_pairs: [deu-eng]}}\n    augment: {lang: fr-CA}\n"
    path = write_config(body)
    with caplog.at_level(logging.WARNING, logger="amrsim.config"):
        cfg = load_config(path)
    ds = cfg.project.pipelines["p"].datasets["d"]
    assert (ds.lang, ds.lang2, list(ds.translations)) == ("de", "en", ["es"])
    assert cfg.project.pipelines["p"].evaluate.sts.lang_pairs == ["de-en"]
    assert cfg.project.pipelines["p"].augment.lang == "fr"
    assert cfg.notes == [f"{path}: language '{raw}' read as '{code}' (region and script are not used)"
                         for raw, code in (("de-DE", "de"), ("en_US", "en"), ("es-419", "es"), ("fr-CA", "fr"))]
    assert [r.getMessage() for r in caplog.records] == cfg.notes


def test_languages_of_parse_translate_and_transfer_are_checked_too(write_config, data_file):
    for section, key in (("parse: {langs: [klingon]}", "parse.langs.0"),
                         ("translate: {source_lang: klingon}", "translate.source_lang"),
                         ("evaluate: {transfer: {tasks: {t: {train: data.tsv, test: {klingon: data.tsv}}}}}",
                          "evaluate.transfer.tasks.t.test.klingon"),
                         ("evaluate: {sts: {lang_pairs: [en-klingon]}}", "evaluate.sts.lang_pairs")):
        with pytest.raises(ConfigError, match=rf"pipeline 'p', key '{key}.*klingon"):
            load_config(write_config(PIPE + f"    {section}\n"))


def test_two_pipelines_defining_one_dataset_differently_are_refused(write_config, data_file):
    body = PIPE + "  q:\n    datasets:\n      d: {path: data.tsv, kind: pairs, lang: de}\n"
    path = write_config(body)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == (f"{path}: pipelines 'p' and 'q' define dataset 'd' differently; they share one "
                            f"warehouse, where its tables would overwrite each other: rename one, or make the two "
                            f"definitions identical")
    # the same definition in both (a benchmark two pipelines evaluate) builds the same tables: allowed
    same = PIPE + "  q:\n    datasets:\n      d: {kind: pairs, path: data.tsv}\n"
    assert set(load_config(write_config(same)).project.pipelines) == {"p", "q"}


def test_default_pipeline_is_optional(write_config, data_file):
    one = load_config(write_config(PIPE.replace("default_pipeline: p\n", "")))
    assert one.pipeline()[0] == "p"  # the only pipeline
    two_body = PIPE.replace("default_pipeline: p\n", "") + "  q:\n    datasets: {}\n"
    two = load_config(write_config(two_body), overrides={"description": "x"}, pipeline="q")
    assert two.pipeline("q")[0] == "q" and two.project.pipelines["q"].description == "x"
    with pytest.raises(ConfigError) as e:
        two.pipeline()
    assert str(e.value) == (f"{two.path}: no pipeline named and no default_pipeline set; name one of ['p', 'q'] on "
                            f"the command line, or set default_pipeline")
    assert load_config(write_config("default_pipeline: q\n" + two_body)).pipeline()[0] == "q"
    with pytest.raises(ConfigError, match=r"key 'default_pipeline', value 'demo': no such pipeline"):
        load_config(write_config("default_pipeline: demo\n" + two_body))


@pytest.mark.parametrize("key", ["warehouse", "run_dir"])
@pytest.mark.parametrize("value", ['""', "'  '"])
def test_an_empty_warehouse_or_run_dir_is_refused(write_config, data_file, key, value):
    """'' would resolve to the config's own directory: tables and Prefect state written beside pipelines.yaml."""
    path = write_config(f"{key}: {value}\n" + PIPE)
    with pytest.raises(ConfigError, match=rf"^{path}: key '{key}', value .*: must name a directory"):
        load_config(path)


@pytest.mark.parametrize("section", ["metrics", "parse"])
@pytest.mark.parametrize("value", ["1e26", "1.0e+26", "100000000000000000000000000", "0", "2000.0", "true"])
def test_commit_rows_out_of_bounds_or_not_whole_is_refused_with_the_bound(write_config, data_file, section, value):
    path = write_config(PIPE + f"    {section}: {{commit_rows: {value}}}\n")
    with pytest.raises(ConfigError, match=rf"key '{section}.commit_rows', .*whole number from 1 to "
                                          rf"{config_module.MAX_COMMIT_ROWS:,}"):
        load_config(path)


def test_commit_rows_within_bounds_is_kept(write_config, data_file):
    path = write_config(PIPE + "    metrics: {commit_rows: 500}\n    parse: {commit_rows: 10000000}\n")
    pipe = load_config(path).project.pipelines["p"]
    assert (pipe.metrics.commit_rows, pipe.parse.commit_rows) == (500, 10_000_000)
