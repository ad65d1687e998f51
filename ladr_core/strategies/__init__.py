"""The sampling strategies: which masked tokens each step commits (the Strategy interface:
ladr_core.step). Every module here is imported by ladr_core.registry the first time a name is
looked up, and each decorated class registers itself: a new strategy is one module here, or one
`@register_strategy` class anywhere. `select` holds the selection primitives they share,
`policy` and `rescue` LADR's policy as data and its neighbour rescue.
"""
