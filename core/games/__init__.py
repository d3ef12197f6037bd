"""Masked pipeline and the calibration and instance games over feature coalitions."""

from core.games.calibration import CalibrationGame
from core.games.instance import instance_values
from core.games.masking import MASKING_PATHS, ROWS_PER_CALL, MaskedEvaluator, MaskingPath

__all__ = [
    "MASKING_PATHS",
    "ROWS_PER_CALL",
    "CalibrationGame",
    "MaskedEvaluator",
    "MaskingPath",
    "instance_values",
]
