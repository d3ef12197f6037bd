"""Masked pipeline and the calibration and instance games over feature coalitions."""

from core.games.calibration import CalibrationGame
from core.games.instance import instance_values
from core.games.masking import ROWS_PER_CALL, MaskedEvaluator

__all__ = ["ROWS_PER_CALL", "CalibrationGame", "MaskedEvaluator", "instance_values"]
