"""Studies: quality against cost on nano (``quality``, ``samplers``, ``rivals``, ``painting``),
the self-score and the calibration built on it (``self_score*``, ``calibration_*``),
quantization (``quant_quality``, ``fp8_quality``), their statistics (``paired_stats``,
``self_score_study``) and finished ``experiments``. Run one with
``python -m lab.studies.<name>``; each writes its JSON to lab/results/.
"""
