"""An emulator of the Kubernetes API subset Wharf uses, served over real HTTP on 127.0.0.1."""
