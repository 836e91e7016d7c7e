"""Which parameter has been explored least: one rule for the server's summary and the agent's hints."""


def least_varied_first(distinct: dict[str, int]) -> list[str]:
    """Param names by how many distinct values each took so far, fewest first; ties keep the given
    (schema) order. A small model that copies the best configuration needs a name to change: the least
    varied one is where an untried value is most likely."""
    order = list(distinct)
    return sorted(order, key=lambda name: (distinct[name], order.index(name)))
