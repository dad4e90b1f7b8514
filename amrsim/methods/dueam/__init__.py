"""DuEAM (Goswami et al. 2021): a learner taught by an anchor"s Word Mover"s Distance.

`train.py`: the model, loss and training loop; `run.py`: the pipeline entry (`Params`, `train`). The names of the
flat module this package replaced resolve lazily (`amrsim.methods.dueam.X`)."""

from amrsim.methods import reexport_lazily

__getattr__ = reexport_lazily(__name__, ("train", "amrsim.methods.training"))
