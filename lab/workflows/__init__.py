"""The tools behind example_workflows/: ``build_examples`` (the UI and API forms from one
description), ``thumbnails`` (their pictures), ``template_extras`` and ``queue_prompts`` (queue
an API workflow with a prompt list against a running server)."""
