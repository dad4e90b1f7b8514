"""A trained run's files are read only from inside the models root (a symlinked weights file or folder is refused,
naming it); a corrupt weights file and an `hf:` folder that holds no model are one line naming the file, exit 2."""

from __future__ import annotations

import json
import shutil

import pytest

from amrsim.encoders import find_trained
from amrsim.errors import ConfigError
from amrsim.methods.loaders import load_encoder
from tests.helpers import one_line_error, run_cli

STS = "sentence1\tsentence2\tscore\nthe red cat\tthe blue dog\t1\nthe cat runs\tthe dog runs\t3\n"


@pytest.fixture
def trained(tmp_path, tiny_model):
    """`s3bert:r1`: the tiny sentence-transformers model as a finished run under tmp_path/warehouse/models."""
    root = tmp_path / "warehouse" / "models"
    run = root / "s3bert" / "r1"
    shutil.copytree(tiny_model, run)
    (run / "model.json").write_text(json.dumps({"method": "s3bert", "run_id": "r1", "encoder": ".",
                                                "created_at": "2026-01-01T00:00:00+00:00"}), encoding="utf-8")
    assert (run / "model.safetensors").is_file()
    return root, run


def _cli(tmp_path, *args):
    (tmp_path / "sts.tsv").write_text(STS, encoding="utf-8")
    return run_cli(tmp_path, "evaluate", "sts", "--file", "sts.tsv", *args)


def test_a_symlinked_weights_file_or_folder_leaving_the_models_root_is_refused(trained, tmp_path):
    root, run = trained
    assert load_encoder("s3bert:r1", models_root=root, device="cpu").encode(["the red cat"]).shape[0] == 1
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(run / "model.safetensors", outside / "model.safetensors")
    (run / "model.safetensors").symlink_to(outside / "model.safetensors")
    with pytest.raises(ValueError, match=r"r1/model\.safetensors resolves outside the models root"):
        find_trained("s3bert:r1", root)
    # a link that stays inside the models root is a file of the run like any other
    shutil.move(outside / "model.safetensors", root / "shared.safetensors")
    (run / "model.safetensors").unlink()
    (run / "model.safetensors").symlink_to(root / "shared.safetensors")
    assert find_trained("s3bert:r1", root).run_id == "r1"
    shutil.move(run / "1_Pooling", outside / "1_Pooling")  # a folder of the run, linked out
    (run / "1_Pooling").symlink_to(outside / "1_Pooling")
    with pytest.raises(ValueError, match=r"r1/1_Pooling resolves outside"):
        find_trained("s3bert:r1", root)

    assert "1_Pooling resolves outside" in one_line_error(_cli(tmp_path, "--encoder", "s3bert:r1"))


def test_a_corrupt_weights_file_is_one_line_naming_it(trained, tmp_path):
    root, run = trained
    (run / "model.safetensors").write_bytes(b"\x00" * 5)
    with pytest.raises(ConfigError, match=r"r1/model\.safetensors: not a readable safetensors weights file"):
        load_encoder("s3bert:r1", models_root=root, device="cpu")
    assert "model.safetensors: not a readable" in one_line_error(_cli(tmp_path, "--encoder", "s3bert:r1"))


@pytest.mark.parametrize("pooling", ["", "#mean"])
def test_an_hf_folder_that_is_not_a_model_is_one_line_naming_it(tmp_path, pooling):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "readme.txt").write_text("not a model", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"{folder} is not a model directory"):
        load_encoder(f"hf:{folder}{pooling}", device="cpu")
    line = one_line_error(_cli(tmp_path, "--encoder", f"hf:{folder}{pooling}"))
    assert f"{folder} is not a model directory" in line
