"""`embeddings.encoder` names the run a `<method>:latest` resolved to, never `:latest`: a newer run leaves what old rows
say unchanged; other names are stored as asked (their `model_id` holds the version or fingerprint); rows an older
amrsim stored under `:latest` still read, by their model id."""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from amrsim.encoders import model_id, resolve
from amrsim.encoders.cache import embed_sentences, read_embeddings
from amrsim.warehouse import content_key
from tests.helpers import CountingEncoder, tiny_sentence_transformer


def frame(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"key": [content_key("sentence", "en", t) for t in texts], "text": texts})


def trained_run(models_root, run_id: str, created_at: str) -> None:
    """A run directory as far as resolving its name needs (model.json); the test hands the encoder in."""
    run = models_root / "s3bert" / run_id
    run.mkdir(parents=True)
    (run / "model.json").write_text(json.dumps({"method": "s3bert", "run_id": run_id, "created_at": created_at,
                                                "encoder": "."}), encoding="utf-8")


def stored(wh, dataset: str = "d") -> list[tuple[str, str]]:
    return sorted(set(wh.read(dataset, "embeddings").select("encoder", "model_id").iter_rows()))


def test_latest_is_stored_as_its_run_and_a_newer_run_does_not_change_old_rows(wh):
    trained_run(wh.models_root, "r1", "2026-11-01T00:00:00")
    texts = frame(["a b", "c d"])
    old_id = model_id("s3bert:r1", wh.models_root)
    assert resolve("s3bert:latest", wh.models_root) == ("s3bert:r1", old_id)
    assert embed_sentences(wh, "d", "s3bert:latest", texts, encoder=CountingEncoder()) == (2, 0)
    assert stored(wh) == [("s3bert:r1", old_id)]

    trained_run(wh.models_root, "r2", "2026-11-29T00:00:00")  # a newer run: :latest is r2 now
    new_id = model_id("s3bert:r2", wh.models_root)
    assert embed_sentences(wh, "d", "s3bert:latest", texts, encoder=CountingEncoder()) == (2, 0)
    assert stored(wh) == [("s3bert:r1", old_id), ("s3bert:r2", new_id)]  # r1's rows still say r1
    # readers find vectors by the run's model id, whichever name asks
    assert read_embeddings(wh, "d", "s3bert:r1", texts["key"].to_list()).shape == (2, 26)
    assert np.array_equal(read_embeddings(wh, "d", "s3bert:latest", texts["key"].to_list()),
                          read_embeddings(wh, "d", "s3bert:r2", texts["key"].to_list()))


def test_a_run_id_a_packaged_name_and_a_directory_are_stored_as_asked(wh, tmp_path):
    trained_run(wh.models_root, "r1", "2026-11-01T00:00:00")
    directory = tiny_sentence_transformer(tmp_path / "tiny")
    names = ["s3bert:r1", "minilm", f"hf:{directory}"]
    for name in names:
        embed_sentences(wh, "d", name, frame(["a b"]), encoder=CountingEncoder())
    assert stored(wh) == sorted((n, model_id(n, wh.models_root)) for n in names)
    assert dict(stored(wh))[f"hf:{directory}"].startswith(f"hf:{directory}@")  # the fingerprint is in model_id


def test_rows_an_older_amrsim_stored_under_latest_still_read(wh):
    trained_run(wh.models_root, "r1", "2026-11-01T00:00:00")
    texts = frame(["a b", "c d"])
    embed_sentences(wh, "d", "s3bert:latest", texts, encoder=CountingEncoder())
    table = wh.read("d", "embeddings")
    wh.upsert("d", "embeddings", table.with_columns(encoder=pl.lit("s3bert:latest")))  # as it used to be stored
    assert stored(wh) == [("s3bert:latest", model_id("s3bert:r1", wh.models_root))]
    expected = CountingEncoder().encode(texts["text"].to_list())
    for name in ("s3bert:latest", "s3bert:r1"):
        assert np.allclose(read_embeddings(wh, "d", name, texts["key"].to_list()), expected)
    # nothing is computed again: the rows' keys are the model id's
    assert embed_sentences(wh, "d", "s3bert:r1", texts, encoder=CountingEncoder()) == (0, 0)
