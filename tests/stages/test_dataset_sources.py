"""Which source a dataset's tables came from: a file evaluated one-off gets a name no pipeline can define; a second
definition (another config sharing the warehouse, another file) writing a dataset name is refused on one line naming
both sources, until the name is released (`amrsim run --replace`); a pipeline's files, headers and column mappings
are checked before anything heavy starts."""

from __future__ import annotations

import pytest

from amrsim.config import DatasetConfig, dataset_name_error, load_config, one_off_dataset
from amrsim.errors import AmrsimError, InputError
from amrsim.evaluate.mteb_tasks import task_of_dataset
from amrsim.stages.ingest import check_pipeline, ingest_stage, ingest_tables
from amrsim.warehouse import Warehouse
from amrsim.warehouse.sources import recorded_source, release

HEADER = ["id", "split", "score", "sentence1", "sentence2"]
ROWS = [["1", "test", "4.0", "A man plays.", "A man is playing."], ["2", "test", "1.0", "A cat.", "The sky."]]


def _config(tmp_path, name: str, file: str, columns: str = "") -> object:
    (tmp_path / name).mkdir(exist_ok=True)
    path = tmp_path / name / "pipelines.yaml"
    path.write_text(f"warehouse: ../warehouse\npipelines:\n  p:\n    datasets:\n      d: {{path: ../{file}, kind: pairs"
                    f"{columns}}}\n", encoding="utf-8")
    return load_config(path).section("p")


def test_a_one_off_name_is_readable_stable_and_never_a_pipeline_name(tmp_path):
    a, b = tmp_path / "x" / "stsb_en_test.tsv", tmp_path / "y" / "stsb_en_test.tsv"
    name = one_off_dataset(a)
    assert name.startswith("file_stsb_en_test_") and dataset_name_error(name) is None
    assert one_off_dataset(a) == name and one_off_dataset(b) != name  # same stem, other file: another dataset
    assert one_off_dataset(a, {"de": tmp_path / "de.tsv"}) not in (name, one_off_dataset(b))
    assert task_of_dataset(name) is None  # `results export --format mteb` takes it only when --task names it


def test_a_second_definition_of_a_dataset_is_refused_naming_both_sources(tmp_path, write_tsv):
    write_tsv("one.tsv", HEADER, ROWS)
    write_tsv("two.tsv", HEADER, [[c.replace("man", "woman") for c in r] for r in ROWS])
    first, second = _config(tmp_path, "a", "one.tsv"), _config(tmp_path, "b", "two.tsv")
    wh = Warehouse(first.warehouse_root)
    ingest_stage(first, "d", "r1")
    before = wh.version("d", "pairs"), wh.version("meta", "lineage")
    with pytest.raises(AmrsimError) as err:
        ingest_stage(second, "d", "r2")
    line = str(err.value)
    assert "\n" not in line and err.value.exit_code == 2
    assert str(tmp_path / "one.tsv") in line and str(tmp_path / "two.tsv") in line and "--replace d" in line
    assert (wh.version("d", "pairs"), wh.version("meta", "lineage")) == before  # nothing written
    assert set(wh.read("d", "pairs")["sentence1"]) == {"A man plays.", "A cat."}
    with pytest.raises(AmrsimError, match="two.tsv"):  # the one-off path too
        ingest_tables(wh, "d", DatasetConfig(path=str(tmp_path / "two.tsv"), kind="pairs"), tmp_path / "two.tsv",
                      "r3", pipeline="cli", origin="cli")
    ingest_stage(first, "d", "r4")  # the owner refreshes as before
    ingest_stage(_config(tmp_path, "a", "one.tsv", ", split: test"), "d", "r5")  # and may edit its definition
    assert release(wh, "d")
    ingest_stage(second, "d", "r6")  # released: the other source takes the name
    assert recorded_source(wh, "d").file == str(tmp_path / "two.tsv")
    assert set(wh.read("d", "pairs")["sentence1"]) == {"A woman plays.", "A cat."}


def test_a_config_may_move_its_dataset_but_an_override_may_not(tmp_path, write_tsv):
    write_tsv("one.tsv", HEADER, ROWS)
    write_tsv("two.tsv", HEADER, ROWS[:1])
    wh = Warehouse(tmp_path / "warehouse")
    ingest_stage(_config(tmp_path, "a", "one.tsv"), "d", "r1")
    config = tmp_path / "a" / "pipelines.yaml"
    overridden = load_config(config, overrides={"datasets.d.path": "../two.tsv"}, pipeline="p").section("p")
    with pytest.raises(AmrsimError, match=r"two.tsv \(defined by .*pipelines.yaml with --set\).*--replace d"):
        ingest_stage(overridden, "d", "r2")
    assert wh.count("d", "pairs") == 2
    ingest_stage(_config(tmp_path, "a", "two.tsv"), "d", "r3")  # the config itself now names another file: an edit
    assert wh.count("d", "pairs") == 1


def test_the_same_definition_in_two_configs_shares_the_tables(tmp_path, write_tsv):
    write_tsv("one.tsv", HEADER, ROWS)
    ingest_stage(_config(tmp_path, "a", "one.tsv"), "d", "r1")
    ingest_stage(_config(tmp_path, "b", "one.tsv"), "d", "r2")  # same file, same definition: the same tables


def test_check_pipeline_finds_a_bad_header_or_a_taken_name_before_anything_is_written(tmp_path, write_tsv):
    write_tsv("one.tsv", HEADER, ROWS)
    write_tsv("bad.tsv", ["id", "split", "score", "sentA", "sentence2"], ROWS)
    with pytest.raises(InputError, match=r"bad.tsv:1: header lacks column\(s\) \['sentence1'\]"):
        check_pipeline(_config(tmp_path, "a", "bad.tsv"))
    with pytest.raises(InputError, match="header lacks column"):
        check_pipeline(_config(tmp_path, "a", "one.tsv", ", columns: {score: similarity}"))
    assert not (tmp_path / "warehouse").exists()
    ingest_stage(_config(tmp_path, "a", "one.tsv"), "d", "r1")
    write_tsv("two.tsv", HEADER, ROWS)
    other = _config(tmp_path, "b", "two.tsv")
    with pytest.raises(AmrsimError, match="--replace d"):
        check_pipeline(other)
    check_pipeline(other, replace=["d"])  # `amrsim run --replace d` releases the name after the checks
