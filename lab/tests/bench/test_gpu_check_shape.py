"""gpu_check's 8B shape (models.SHAPE_8B, IDS_8B) is a checkpoint the loader accepts: a
config.json of LLaDA-8B's fields at that shape parses, the loader derives the same special ids
the GPU check and the estimate run with, and admits the shape's maximum length."""

from __future__ import annotations

from lab.benchmarks.gpu_check.models import IDS_8B, SHAPE_8B
from lab.benchmarks.gpu_check.speed import shape
from lab.benchmarks.gpu_estimate.measure import model_shape
from ladr_core.dimoo.model.config import LLaDAConfig, context_length
from ladr_core.dimoo.weights.files import parse_config
from tests.kit.real_repo import LLADA_8B


def _derived(config: LLaDAConfig) -> tuple:
    return (config.d_model, config.n_layers, config.head_dim, config.effective_n_kv_heads,
            config.hidden_size, config.n_embeddings, config.max_sequence_length,
            config.rope_theta)


def test_the_8b_shape_loads_with_the_ids_the_gpu_check_uses() -> None:
    raw = {**LLADA_8B, **SHAPE_8B, "architectures": ["LLaDAForMultiModalGeneration"]}
    config, ids = parse_config(raw, "config.json")
    assert _derived(config) == _derived(LLaDAConfig(**SHAPE_8B))
    assert ids == IDS_8B == shape(smoke=False)[1] == model_shape("8b")[1]
    assert ids.image_offset == 126356  # the official offset; the head's last 108 rows are padding
    assert ids.image_offset + ids.codebook_size == SHAPE_8B["embedding_size"] - 108
    assert context_length(config, ids) >= SHAPE_8B["max_sequence_length"]
