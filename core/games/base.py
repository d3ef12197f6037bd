"""What a game over feature coalitions offers, and the record each kind of game registers.

A game gives every coalition of a design's lattice (rows of boolean masks over the players) a
value on its family's scale T. The two games of the method split T(width) between them: the
calibration game v_C(S) = A(q_S) depends on alpha and not on the patient, the instance game
v_I(S; x) = B(h_S(x)) on the patient and not on alpha. Every attribution design is linear in
the game, so one design serves both games and their sum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cpdecomp.core.conformal import Family, Scale
from cpdecomp.core.typing import Coalitions, FloatArray


@runtime_checkable
class Game(Protocol):
    """Values of one game on the coalitions it was evaluated on.

    The two games subclass it for n_players and scale; anything with these members is one.
    """

    family: Family
    coalitions: Coalitions
    """(n_coalitions, n_players) boolean masks, in the design's order."""

    @property
    def n_players(self) -> int:
        """The features (or groups of them) the coalitions are masks over."""
        return int(self.coalitions.shape[1])

    @property
    def scale(self) -> Scale:
        """The family's scale T, on which the values are given (log units or width units)."""
        return self.family.scale

    def values(self, alpha: float) -> FloatArray:
        """v(S) for every coalition: (n_coalitions,) for the calibration game,
        (n_patients, n_coalitions) for the instance game (which ignores alpha)."""
        ...


@dataclass(frozen=True)
class GameKind:
    """A kind of game: what it is called and what its values depend on."""

    name: str
    label: str
    symbol: str
    """How the method page writes it (v_C, v_I)."""
    per_patient: bool
    """True when each patient has its own values (computed per chunk of patients)."""
    uses_alpha: bool
    """True when its values change with alpha (the calibration game re-ranks, no model call)."""
