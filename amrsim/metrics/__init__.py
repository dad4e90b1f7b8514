"""AMR graph metrics: Smatch, fine-grained aspects, Weisfeiler-Leman kernels; batch engine."""
