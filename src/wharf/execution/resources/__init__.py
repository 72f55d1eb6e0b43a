"""The engine's port for a step's resources (:mod:`.port`), its embedded (:mod:`.embedded`)
and team (:mod:`.team`) adapters, the wait room (:mod:`.wait_room`) and the holders' gate
(:mod:`.holders_first`). Nothing is re-exported: importing this package loads no RM model."""
