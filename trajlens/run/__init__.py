"""The run layer: one way to read a stored run, below everything that reads runs.

- :class:`~trajlens.run.location.StoreLocation`: a store on any file system ``pyarrow.fs``
  opens (its runs, a step's rows from single or packed partitions, analysis tables);
- :class:`~trajlens.run.reader.RunReader`: one run of it, read a step (or a few) at a time;
- :mod:`~trajlens.run.partitions`: where a run table's rows lie (:class:`Partitions`);
- :mod:`~trajlens.run.batches`: a run read a batch of steps at a time under a token budget;
- :mod:`~trajlens.run.facts`: what a stored run's data holds, for choosing estimators;
- :mod:`~trajlens.run.advantages` and :mod:`~trajlens.run.stepwise`: advantages recomputed
  over a stored run, and their per-step batch diagnostics;
- :mod:`~trajlens.run.choices`: which estimators the report recomputes on a run.

Report, checks, attribution, compare and the engines stand on this package; it imports none
of them.
"""

from trajlens.run.location import StoreLocation, write_tables
from trajlens.run.reader import RunReader

__all__ = ["RunReader", "StoreLocation", "write_tables"]
