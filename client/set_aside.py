"""The functions a code turn stops showing for a while: those whose new versions failed again and again.

A turn that keeps showing the hottest function and its wrong output invites the same wrong rewrite
again, and the next hot spot, perhaps an easy one, is never shown. A careful engineer who cannot get one function right goes back to the last version that
worked and takes the next hot spot. The stateful agent does that: after SET_ASIDE_AFTER failed
experiments in a row that changed a function, train.py goes back to the best version (the original
when nothing has run well) and the focus moves to the next function of the profile. When every profiled
function has been set aside, they are all shown again.
"""

from collections import Counter
from dataclasses import dataclass, field

from autoresearch_mcp.contract.functions import MODULE
from autoresearch_mcp.contract.profile import Profile

SET_ASIDE_AFTER = 2


@dataclass
class SetAside:
    wrong: Counter[str] = field(default_factory=Counter)  # failed experiments in a row, by function
    names: set[str] = field(default_factory=set)
    seen: int | None = None  # the last experiment counted (its iteration)

    def record(self, iteration: int, status: str, changed: list[str]) -> list[str]:
        """Count one experiment (once, however many turns read it) that changed the functions
        `changed`; the functions to set aside now."""
        if iteration == self.seen or status == "running":
            return []
        self.seen = iteration
        if status == "ok":
            for name in changed:
                self.wrong.pop(name, None)
            return []
        self.wrong.update(changed)
        stuck = [name for name in changed if self.wrong[name] >= SET_ASIDE_AFTER]
        for name in stuck:
            del self.wrong[name]
        self.names.update(stuck)
        return stuck

    def skip(self, profile: Profile | None) -> frozenset[str]:
        """The functions to pass over: none once every profiled function is set aside (start again)."""
        if profile is None or not self.names:
            return frozenset()
        profiled = {f.name.rpartition(":")[2] for f in profile.functions if f.share > 0} - {MODULE}
        if profiled <= self.names:
            self.names.clear()
        return frozenset(self.names)


def set_aside_note(
    stuck: list[str], version: int | None, back: int, best: bool, metric: str, refused: str | None = None
) -> str:
    """What the model is told when the agent moved on (`version`: the new version after going back;
    None when train.py was not on the failed version any more, or when going back was `refused`)."""
    names = ", ".join(stuck)
    instead = (
        "speed up the function below instead" if metric == "speedup" else "change what is shown below instead"
    )
    said = f"{names}: {SET_ASIDE_AFTER} versions in a row failed, so it is set aside for now"
    if refused is not None:
        # train.py is still the failed version: "change what is shown" alone would build on it.
        return f"{said}, but going back to v{back} was refused ({refused}): REVERT v{back}, then {instead}."
    if version is None:
        return f"{said}; {instead}."
    where = "the best so far" if best else "the original"
    return f"{said}: train.py went back to v{back} ({where}) as v{version}; {instead}."
