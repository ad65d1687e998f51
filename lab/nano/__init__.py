"""Training and evaluation code for the DiMOO-nano demo model (never imported by `ladr_core`).

Modules: `scenes` (seeded procedural scenes + GenEval-style captions), `tokenizer` (word-level
tokenizer with DiMOO's special tokens), `vq` (diffusers VQModel training), `train_transformer`
(masked-diffusion objective), `evaluator` (colour segmentation + connected components + shape
classification), `train_all` (everything), `tune_cfg` / `tune_policy` (the shipped guidance and
policy), `ceiling`, `shape_check`, `fit_preview_table`, `painting_tasks`.
"""
