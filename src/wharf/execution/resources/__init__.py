"""The engine's port for a step's resources (:mod:`.port`), its embedded (:mod:`.embedded`)
and team (:mod:`.team`) adapters and the wait room (:mod:`.wait_room`). Nothing is
re-exported: importing this package loads no RM model."""
