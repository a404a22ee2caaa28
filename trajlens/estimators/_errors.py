"""The estimators' input error, in a module without torch so the registry can raise it."""

from __future__ import annotations

from trajlens.errors import TrajlensError


class EstimatorInputError(TrajlensError, ValueError):
    """Estimator arguments of the wrong type, dtype or shape, or with values it cannot use.

    The message names the function, the argument and the shapes involved.
    """
