"""The networks: the LLaDA config and transformer (official parameter names), packed passes,
block streaming, opt-in compilation and the VQ-VAE (encode, decode, preview table).

The bottom layer of ``ladr_core.dimoo``: it imports nothing else of the package.
"""
