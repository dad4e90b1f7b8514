"""A run stopped between two reports (max_steps, or killed after a `checkpoint_every` checkpoint) and resumed ends
bit-identical to an uninterrupted run: the same weights, the same history (the loss means of the interrupted
window included) and no dev score an uninterrupted run would not take (so the same best model)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, load_model, save_model

from amrsim.evaluate import DevScore
from amrsim.methods.training import Checkpoints, Trainer, TrainingArgs, seeded_batches
from tests.methods.test_dueam import tiny_bert, toy_pairs  # noqa: F401 - the tiny model fixture

pytestmark = pytest.mark.usefixtures("one_thread")

X = torch.linspace(-1, 1, 24 * 3).reshape(24, 3)
Y = X @ torch.tensor([0.5, -1.0, 2.0]) + 0.1


def fit(out_dir, max_steps=None, reseed=None):
    """A dropout network on 24 rows, 3 batches an epoch, 4 epochs, reports every 4 steps; returns the trainer and the
    steps at which the dev score was taken."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1))
    args = TrainingArgs(lr=0.05, batch_size=8, epochs=4, eval_every=4, max_steps=max_steps, weight_decay=0.01,
                        max_grad_norm=0.0, warmup=2)
    if reseed is not None:  # a new process starts from another RNG state: the checkpoint's must be put back
        torch.manual_seed(reseed)
    scored_at: list[int] = []

    def dev() -> float:
        scored_at.append(trainer.state["step"])
        with torch.no_grad():
            model.eval()
            loss = float(((model(X).squeeze(1) - Y) ** 2).mean())
            model.train()
        return loss

    def losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        batch = torch.as_tensor(rows)
        return {"mse": ((model(X[batch]).squeeze(1) - Y[batch]) ** 2).mean()}

    checkpoints = Checkpoints(out_dir, {"seed": 0}, lambda d: save_model(model, str(d / "w.safetensors")),
                              lambda d: load_model(model, str(d / "w.safetensors")))
    trainer = Trainer("toy", args, [model], 3, seeded_batches(0, 24, 8), losses,
                      evaluator=DevScore(dev, greater_is_better=False), checkpoints=checkpoints)
    trainer.fit()
    save_model(model, str(out_dir / "final.safetensors"))
    return trainer, scored_at


@pytest.mark.parametrize("stop", [2, 4, 7])  # inside the first window, at a report, inside a later window
def test_a_run_stopped_anywhere_resumes_to_the_uninterrupted_run_bit_for_bit(tmp_path, stop):
    whole, whole_scored = fit(tmp_path / "whole")
    assert whole.completed and whole_scored == [0, 4, 8, 12]  # the start, every 4 steps, the last step

    part, part_scored = fit(tmp_path / "part", max_steps=stop)
    assert not part.completed and part.state["step"] == stop
    assert part_scored == [s for s in whole_scored if s <= stop]  # no extra dev score where it stopped
    saved = json.loads((tmp_path / "part" / "checkpoint" / "state.json").read_text(encoding="utf-8"))
    assert saved["step"] == stop and ("window" in saved) == (stop % 4 != 0)

    resumed, resumed_scored = fit(tmp_path / "part", reseed=1234)
    assert resumed.resumed_from == stop and resumed.completed
    assert part_scored + resumed_scored == whole_scored
    assert resumed.state["history"] == whole.state["history"]  # every loss mean and dev score, exactly
    assert resumed.state["best_step"] == whole.state["best_step"]
    a, b = load_file(tmp_path / "whole" / "final.safetensors"), load_file(tmp_path / "part" / "final.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_dueam_stopped_between_reports_resumes_to_the_same_weights_and_history(tiny_bert, tmp_path):  # noqa: F811
    from amrsim.methods.dueam import train_dueam

    t1, t2 = toy_pairs(40, 0)
    dev = (["the cat runs", "the dog sleeps", "the cat sleeps", "the dog runs"],
           ["the cat runs", "the cat runs", "the dog sleeps", "die katze läuft"], np.array([5.0, 1.0, 2.0, 3.0]))
    kwargs = {"dev": dev, "batch_size": 8, "lr": 1e-3, "warmup": 1, "epochs": 3, "eval_every": 5, "device": "cpu"}
    train_dueam(tiny_bert, tiny_bert, t1, t2, tmp_path / "whole", **kwargs)
    train_dueam(tiny_bert, tiny_bert, t1, t2, tmp_path / "cut", max_steps=7, **kwargs)  # 2 steps past a report
    torch.manual_seed(999)
    done = train_dueam(tiny_bert, tiny_bert, t1, t2, tmp_path / "cut", **kwargs)
    assert done["resumed_from"] == 7 and done["completed"]
    a, b = load_file(tmp_path / "whole" / "model.safetensors"), load_file(tmp_path / "cut" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    history = [json.loads((tmp_path / run / "model.json").read_text(encoding="utf-8"))["history"]
               for run in ("whole", "cut")]
    assert history[0] == history[1] and [h["step"] for h in history[0]] == [5, 10, 15]
