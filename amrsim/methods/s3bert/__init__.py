"""S3BERT (Opitz & Frank 2022): AMR-aspect sub-embeddings of a sentence-transformers model.

`train.py`: the model, loss and training loop; `run.py`: the pipeline entry (`Params`, `train`). The names of the
flat module this package replaced resolve lazily (`amrsim.methods.s3bert.X`)."""

from amrsim.methods import reexport_lazily

__getattr__ = reexport_lazily(__name__, ("train", "amrsim.methods.training"))
