"""Seeded sample runs with known ground truth: the seed phenomena, reproduced.

``generate("sao-r6", Path("out/r6"))`` writes a run directory in the canonical layout plus
``truth.json`` (the injected curves and events, and what was realised); :data:`SCENARIOS`
holds the scenario specs. ``python -m trajlens.synth.regenerate`` rebuilds ``sample_data/``.
"""

from trajlens.synth.curves import Curve
from trajlens.synth.generate import SynthResult, generate
from trajlens.synth.scenarios import SCENARIOS
from trajlens.synth.spec import Scenario
from trajlens.synth.truth import load_truth

__all__ = ["SCENARIOS", "Curve", "Scenario", "SynthResult", "generate", "load_truth"]
