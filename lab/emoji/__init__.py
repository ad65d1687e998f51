"""The emoji testbed (docs/reports/EMOJI.md): a second, real-picture world for measuring the pack.

Modules: `packages` (pinned npm artwork in a cache outside the repository), `vocab` (the 24
emoji and why), `bank` (pictures cut from the packages, manifest + checksums), `scenes` (scenes
with known truth, GenEval-style captions, prompt splits), `judge` / `judge_eval` (the
independent judge and its measurement), `vq` (the learned VQModel), `train` (the DiMOO-layout
transformer, reusing lab.nano's trainer), `build` (the stages' command line).
"""
