"""Single path: each destination leaf pinned to one of the equal-cost ports
(leaf k's traffic through spine k mod n), the baseline ECMP is measured
against."""

from typing import Tuple

from policies.policy import Policy, register


@register
class SinglePath(Policy):
    name = "single-path"
    order = 1
    summary = "single-path pins each destination leaf to one spine"

    def pin(self, ports: Tuple[int, ...], group: int) -> Tuple[int, ...]:
        return ports if len(ports) < 2 else (ports[(group - 1) % len(ports)],)
