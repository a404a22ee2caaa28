"""Slow, obviously-correct loop references for the estimators, written as the trainers write them.

Each function transcribes a reference trainer's own code, loop for loop, so the fast kernels in
:mod:`trajlens.estimators` can be checked against it on random inputs (``tests/estimators``,
``tests/reference`` and the GAE benchmarks do). Nothing here is fast, and nothing in trajlens
computes with it; never call these on a whole run.

- :mod:`trajlens.estimators.reference.verl`: verl's ``core_algos`` estimators, ``agg_loss`` and
  ``masked_whiten``.
- :mod:`trajlens.estimators.reference.trl`: TRL's inline ``GRPOTrainer`` and ``RLOOTrainer``
  advantage code and its ``nanstd``.

Notation in docstrings: B trajectories, T token positions, K reward channels.
"""
