"""pipelines.yaml validation: every error names the file, pipeline, key and value before work starts."""

from __future__ import annotations

import pytest

from amrsim.config import load_config
from amrsim.errors import ConfigError
from tests.helpers import ROOT

GOOD = """
default_pipeline: p
pipelines:
  p:
    datasets:
      d:
        path: data.tsv
        kind: pairs
    encode: {encoders: [minilm], batch_size: 16}
    evaluate: {sts: {datasets: [d], lang_pairs: [en-en]}}
"""


@pytest.fixture
def data_file(tmp_path):
    (tmp_path / "data.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n", encoding="utf-8")


def test_repository_config_is_valid_and_demo_is_default():
    cfg = load_config(ROOT / "pipelines.yaml")
    name, pipe = cfg.pipeline()
    assert name == "demo"
    assert set(pipe.datasets) == {"sample_sts", "sample_nli"}
    assert pipe.datasets["sample_sts"].translations.keys() == {"de", "es", "fr"}
    assert cfg.resolve_path(pipe.datasets["sample_sts"].path).is_file()


def test_valid_config_and_overrides(write_config, data_file):
    path = write_config(GOOD)
    cfg = load_config(path, overrides={"encode.batch_size": 8})
    _, pipe = cfg.pipeline()
    assert pipe.encode.batch_size == 8
    assert cfg.resolve_path("data.tsv") == (path.parent / "data.tsv").resolve()


def test_unknown_key_names_pipeline_key_and_value(write_config, data_file):
    path = write_config(GOOD.replace("batch_size: 16", "batch_size: 16, bach: 3"))
    with pytest.raises(ConfigError) as e:
        load_config(path)
    msg = str(e.value)
    assert str(path) in msg and "pipeline 'p'" in msg and "encode.bach" in msg and "unknown key" in msg
    assert "3" in msg


def test_wrong_type_names_value(write_config, data_file):
    with pytest.raises(ConfigError, match=r"pipeline 'p', key 'encode.batch_size', value 'many'"):
        load_config(write_config(GOOD.replace("batch_size: 16", "batch_size: many")))


def test_missing_file_is_caught_before_work(write_config):
    cfg = load_config(write_config(GOOD))  # data.tsv not written
    with pytest.raises(ConfigError, match=r"pipeline 'p', key 'datasets.d.path', value 'data.tsv': file not found"):
        cfg.pipeline("p")


def test_malformed_yaml_names_line(write_config):
    path = write_config("pipelines:\n  p: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"{path}:\d+: malformed YAML"):
        load_config(path)


def test_unknown_dataset_reference_and_encoder(write_config, data_file):
    with pytest.raises(ConfigError, match=r"unknown dataset 'nope'"):
        load_config(write_config(GOOD.replace("datasets: [d]", "datasets: [nope]")))
    with pytest.raises(ConfigError, match=r"unknown encoder 'bert'"):
        load_config(write_config(GOOD.replace("encoders: [minilm]", "encoders: [bert]")))


def test_dataset_names_cannot_escape_the_warehouse(write_config, data_file):
    with pytest.raises(ConfigError, match=r"dataset name '\.\./x'"):
        load_config(write_config(GOOD.replace("      d:\n", "      ../x:\n")))


def test_unknown_pipeline_and_column_roles(write_config, data_file):
    cfg = load_config(write_config(GOOD))
    with pytest.raises(ConfigError, match=r"pipeline 'q' not found"):
        cfg.pipeline("q")
    with pytest.raises(ConfigError, match=r"columns has roles \['premise'\]"):
        load_config(write_config(GOOD.replace("kind: pairs", "kind: pairs\n        columns: {premise: x}")))


def test_non_utf8_config(tmp_path):
    path = tmp_path / "pipelines.yaml"
    path.write_bytes(b"pipelines:\n  p: {description: \xff}\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path)


def test_unknown_training_method_fails_at_load(write_config, data_file):
    body = GOOD.replace("    encode:", "    train: [{method: nope}]\n    encode:")
    with pytest.raises(ConfigError, match=r"pipeline 'p', key 'train.0.method', value 'nope': unknown training"):
        load_config(write_config(body))


@pytest.mark.parametrize("score_range", ["[5, 0]", "[2.5, 2.5]"])
def test_score_range_must_be_increasing(write_config, data_file, score_range):
    body = GOOD.replace("kind: pairs", f"kind: pairs\n        score_range: {score_range}")
    with pytest.raises(ConfigError, match=r"pipeline 'p', key 'datasets.d.score_range', value .*: "
                                          r"score_range must be \[min, max\] with min < max"):
        load_config(write_config(body))
    assert load_config(write_config(GOOD.replace("kind: pairs", "kind: pairs\n        score_range: [0, 5]")))


@pytest.mark.parametrize("where, duplicated, first, second", [
    # a whole pipeline defined twice: the second must not silently win
    ("top", "p", 4, 11),
    ("nested", "batch_size", 11, 12),
])
def test_duplicate_keys_name_the_key_and_both_lines(write_config, data_file, where, duplicated, first, second):
    body = GOOD + "  p:\n    datasets: {d: {path: data.tsv, kind: pairs}}\n" if where == "top" else \
        GOOD.replace("    encode: {encoders: [minilm], batch_size: 16}\n",
                     "    encode:\n      encoders: [minilm]\n      batch_size: 16\n      batch_size: 32\n")
    path = write_config(body)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"{path}:{second}: duplicate key '{duplicated}' (lines {first} and {second})"


def test_a_yaml_merge_key_is_not_a_duplicate(write_config, data_file):
    body = GOOD.replace("    encode: {encoders: [minilm], batch_size: 16}\n",
                        "    x-enc: &enc {encoders: [minilm], batch_size: 16}\n"
                        "    encode: {<<: *enc, batch_size: 8}\n")
    with pytest.raises(ConfigError, match="x-enc"):  # merge handled; the anchor holder itself is an unknown key
        load_config(write_config(body))
    body = "x-enc: &enc {encoders: [minilm], batch_size: 16}\n" + GOOD.replace(
        "    encode: {encoders: [minilm], batch_size: 16}\n", "    encode: {<<: *enc, batch_size: 8}\n")
    with pytest.raises(ConfigError, match="key 'x-enc'"):
        load_config(write_config(body))


@pytest.mark.parametrize("key, value, expected", [
    ("encode.batch_size", "true", "valid integer"),
    ("encode.batch_size", "'16'", "valid integer"),
    ("encode.batch_size", "16.0", "valid integer"),
    ("ray.num_cpus", "false", "valid integer"),
    ("ray.connect_timeout_s", "'5'", "valid number"),
    ("datasets.d.score_range", "[0, '5']", "valid number"),
    ("datasets.d.score_range", "[false, 5]", "valid number"),
])
def test_numbers_are_not_coerced_from_bools_or_strings(write_config, data_file, key, value, expected):
    with pytest.raises(ConfigError, match=rf"pipeline 'p', key '{key}(\.\d)?', value .*{expected}"):
        load_config(write_config(GOOD), overrides={key: _yaml(value)}, pipeline="p")


def test_training_params_are_strict_numbers_and_exponents_read_as_floats(write_config, data_file):
    from pydantic import ValidationError

    from amrsim.methods import method_params

    with pytest.raises(ValidationError, match="valid integer"):
        method_params("s3bert", {"datasets": ["d"], "batch_size": True})
    with pytest.raises(ValidationError, match="valid number"):
        method_params("s3bert", {"datasets": ["d"], "lr": "fast"})
    train = "    train: [{method: s3bert, params: {datasets: [d], lr: 2e-5, batch_size: 8}}]\n"
    body = GOOD.replace("    encode:", train + "    encode:")
    cfg = load_config(write_config(body))  # YAML 1.1 reads 2e-5 as a string; the config loader reads it as 2.0e-5
    assert method_params("s3bert", cfg.project.pipelines["p"].train[0].params).lr == pytest.approx(2e-5)
    assert _yaml("1e3") == 1000.0 and _yaml("'1e3'") == "1e3" and _yaml("e5") == "e5"


def _yaml(text: str):
    from amrsim.config import load_yaml_value

    return load_yaml_value(text)
