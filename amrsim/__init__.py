"""amrsim: multilingual sentence similarity enriched with AMR, as a batch pipeline over a Delta warehouse."""

__version__ = "0.1.0"
