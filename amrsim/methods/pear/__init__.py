"""PEAR (Jørgensen 2024): a cross-encoder for relatedness with kNN re-sampling and an Optuna search.

`train.py`: the model, loss and training loop; `run.py`: the pipeline entry (`Params`, `train`). The names of the
flat module this package replaced resolve lazily (`amrsim.methods.pear.X`)."""

from amrsim.methods import reexport_lazily

__getattr__ = reexport_lazily(__name__, ("train", "amrsim.methods.training"))
