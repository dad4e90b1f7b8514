"""MSE-AMR (Cai et al. 2022): a contrastive encoder of linearised AMR graphs beside a base sentence encoder.

`train.py`: the model, loss and training loop; `data.py`: NLI triples and their graphs from the warehouse;
`encoder.py`: the trained encoder at encode time; `run.py`: the pipeline entry (`Params`, `train`). The names of the
flat module this package replaced resolve lazily (`amrsim.methods.mse_amr.X`)."""

from amrsim.methods import reexport_lazily

__getattr__ = reexport_lazily(__name__, ("train", "data", "encoder", "amrsim.methods.training"))
