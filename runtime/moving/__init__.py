"""Moving an embedded data dir into the production engines (issue 33 §5, `rewards move-to-production`): the warehouse
(runtime.moving.warehouse) and the state store (runtime.moving.state), copied while no `rewards serve` runs on the
data dir."""

from runtime.moving.refusals import MoveRefused

__all__ = ["MoveRefused"]
