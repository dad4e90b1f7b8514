"""What the `Trainer` builds from `TrainingArgs` for every method: AdamW with one weight-decay rule, the warmup (steps
or a fraction of the run) and schedule, gradient accumulation equal to the whole batch, and the `TrainResult`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from amrsim.methods import meaning
from amrsim.methods.training import Part, Trainer, TrainingArgs, TrainResult, linear_warmup, seeded_batches

X = torch.linspace(-1, 1, 20 * 3).reshape(20, 3)
Y = X @ torch.tensor([0.5, -1.0, 2.0]) + 0.1


def net(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.LayerNorm(8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def trainer(model: torch.nn.Module, **args) -> Trainer:
    """A Trainer of `model` on 20 rows (mean squared error, a mean over the batch's rows)."""
    hp = TrainingArgs(**{"lr": 0.05, "batch_size": 8, "epochs": 3, "weight_decay": 0.1, "warmup": 2, **args})

    def losses(rows: np.ndarray) -> dict[str, torch.Tensor]:
        batch = torch.as_tensor(rows)
        return {"mse": ((model(X[batch]).squeeze(1) - Y[batch]) ** 2).mean()}

    return Trainer("toy", hp, [model], -(-20 // hp.batch_size), seeded_batches(0, 20, hp.batch_size), losses)


@pytest.mark.parametrize("k", [2, 3, 8])  # chunks of 4, of 3 (the last batch: 3 + 1 rows), of single rows
def test_accumulating_k_chunks_equals_the_whole_batch(k):
    whole_model, chunked_model = net(), net()
    whole = trainer(whole_model).fit()
    chunked = trainer(chunked_model, grad_accumulation_steps=k).fit()
    assert chunked.steps == whole.steps == 9 and chunked.completed
    assert [h["mse"] for h in chunked.history] == pytest.approx([h["mse"] for h in whole.history], rel=1e-5)
    for a, b in zip(whole_model.parameters(), chunked_model.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.equal(next(net().parameters()), next(whole_model.parameters()))  # it trained


def test_no_weight_decay_on_biases_and_norms_unless_the_method_decays_every_parameter():
    model = net()
    groups = trainer(model).optimizer.param_groups
    decayed = {id(p) for g in groups if g["weight_decay"] > 0 for p in g["params"]}
    assert decayed == {id(model[0].weight), id(model[3].weight)}
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    hp = meaning.Hyper(weight_decay=0.1, batch_size=8)
    every = Trainer("toy", hp, [Part(model, 0.5), Part(torch.nn.Linear(2, 2), 0.1)], 1, lambda s: np.arange(8),
                    lambda rows: {}).optimizer.param_groups
    assert [(len(g["params"]), g["weight_decay"], g["lr"]) for g in every] == [(6, 0.1, 0.5), (2, 0.1, 0.1)]


def test_warmup_is_steps_or_a_fraction_of_the_run_then_the_schedule():
    assert TrainingArgs(warmup=3).warmup_steps(100) == 3
    assert TrainingArgs(warmup=0.1).warmup_steps(100) == 10 and TrainingArgs(warmup=0.1).warmup_steps(7) == 1
    with pytest.raises(ValidationError):
        TrainingArgs(warmup=1.5)
    with pytest.raises(ValidationError, match="grad_accumulation_steps 9 is over batch_size 8"):
        TrainingArgs(batch_size=8, grad_accumulation_steps=9)
    model = net()
    lrs = []
    t = trainer(model, lr_schedule="constant", warmup=0.25, epochs=4, max_steps=5)  # 12 steps: 3 of warmup
    t.losses = lambda rows, f=t.losses: lrs.append(t.optimizer.param_groups[0]["lr"]) or f(rows)
    result = t.fit()
    assert isinstance(result, TrainResult) and result.steps == 5 and not result.completed
    assert lrs == pytest.approx([0.0, 0.05 / 3, 0.1 / 3, 0.05, 0.05])
    assert [linear_warmup(2, 10)(s) for s in (0, 1, 2, 6, 10)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0])
