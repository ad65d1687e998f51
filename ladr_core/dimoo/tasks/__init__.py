"""What a run does beyond text to image: inpainting / outpainting (painting), image editing
(editing, edit_size) and the self-score. Each receives what it uses (encoder, ids, a denoiser
factory), never the pipeline.

Imports ``ladr_core.dimoo.model`` and ``ladr_core.dimoo.denoise``.
"""
