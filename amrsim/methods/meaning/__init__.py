"""Meaning embeddings (Tiyajamorn et al. 2021): meaning and language parts of a frozen multilingual embedding, plus a
supervised STS head.

`train.py`: the model, loss and training loop; `run.py`: the pipeline entry (`Params`, `train`). The names of the
flat module this package replaced resolve lazily (`amrsim.methods.meaning.X`)."""

from amrsim.methods import reexport_lazily

__getattr__ = reexport_lazily(__name__, ("train",))
