"""Masked pipeline and the calibration and instance games over feature coalitions.

`GAMES` is the games axis' registry, like the families', methods' and models': each entry says
what its values depend on; `Game` (core/games/base.py) is what both games offer.
"""

from cpdecomp.core.games.base import Game, GameKind
from cpdecomp.core.games.calibration import CALIBRATION_GAME, CalibrationGame
from cpdecomp.core.games.instance import (
    INSTANCE_GAME,
    InstanceGame,
    instance_shapley,
    instance_values,
)
from cpdecomp.core.games.masking import MASKING_PATHS, ROWS_PER_CALL, MaskedEvaluator, MaskingPath

GAMES: dict[str, GameKind] = {kind.name: kind for kind in (CALIBRATION_GAME, INSTANCE_GAME)}
"""The two games of the method, in the order the width splits (T = v_C + v_I)."""

__all__ = [
    "GAMES",
    "MASKING_PATHS",
    "ROWS_PER_CALL",
    "CalibrationGame",
    "Game",
    "GameKind",
    "InstanceGame",
    "MaskedEvaluator",
    "MaskingPath",
    "instance_shapley",
    "instance_values",
]
