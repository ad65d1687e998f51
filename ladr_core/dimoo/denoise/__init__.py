"""The ``denoise`` callable: prompt template and token layout, packed rows, batched CFG and the
ML-Cache (per item).

Imports only ``ladr_core.dimoo.model``.
"""
