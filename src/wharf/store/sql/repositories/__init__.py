"""One repository module per aggregate; each implements one Protocol of ``wharf.store.ports``."""
